"""The instance agent: what the user-data runs on each EC2 instance of an attempt.

`python -m spotfit.backends.aws.agent JOB_URL ATTEMPT --imds URL`:

1. reads `attempts/<n>/launch.json` from the job's store (code archive, workdir, env, workers);
2. unpacks the code into the workdir the runtime expects;
3. with several workers, waits for `attempts/<n>/cluster.json` (the workers' private
   addresses, written by the backend once the instances exist), finds its own index by its
   private address (IMDSv2) and sets `TF_CONFIG`;
4. runs `python -m spotfit.runtime JOB_URL ATTEMPT` in its own process group and forwards a
   preemption as SIGTERM: the spot interruption notice (IMDSv2 `spot/instance-action`) or
   `attempts/<n>/preempt.json` in the store (the controller's `preempt`);
5. uploads its log and exits with the runtime's code; the user-data then powers off.

The IMDS address is a flag, so that tests point it at a loopback server. Steps 2 to 4, but for where the notice and
the address come from, are shared with the other clouds' agents (`backends/agent_runner.py`).
"""

from __future__ import annotations

import os
import sys
import time
import urllib.error
import urllib.request

from spotfit.backends.agent_runner import agent_arguments, join_cluster, run_runtime
from spotfit.backends.attempt_files import unpack_attempt
from spotfit.backends.aws.secrets import agent_env as agent_secrets
from spotfit.stores import open_store

NOTICE_PATH = "/latest/meta-data/spot/instance-action"
LOCAL_IP_PATH = "/latest/meta-data/local-ipv4"


class Imds:
    """IMDSv2: a session token first (PUT), then reads that present it."""

    def __init__(self, base_url: str, timeout_s: float = 2.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s
        self._token: str | None = None
        self._token_at = 0.0

    def _get_token(self) -> str:
        if self._token is None or time.time() - self._token_at > 3000:
            req = urllib.request.Request(f"{self.base_url}/latest/api/token", method="PUT",
                                         headers={"X-aws-ec2-metadata-token-ttl-seconds": "3600"})
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                self._token, self._token_at = resp.read().decode(), time.time()
        return self._token

    def get(self, path: str) -> str | None:
        """The document at `path`, or None when it does not exist (404) or IMDS is unreachable."""
        try:
            req = urllib.request.Request(f"{self.base_url}{path}",
                                         headers={"X-aws-ec2-metadata-token": self._get_token()})
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                body: bytes = resp.read()
                return body.decode()
        except urllib.error.HTTPError as exc:
            if exc.code == 401:
                self._token = None
            return None
        except (urllib.error.URLError, OSError, ValueError):
            return None


def run(job_url: str, attempt: int, imds_url: str, poll_s: float = 2.0,
        runtime_cmd: list[str] | None = None) -> int:
    """Run one worker of an attempt to its end; returns the runtime's exit code."""
    store = open_store(job_url)
    launch, workdir = unpack_attempt(store, attempt)
    imds = Imds(imds_url)
    env = {**os.environ, **launch.get("env", {}), "PYTHONUNBUFFERED": "1"}
    env.update(agent_secrets(store))  # the spec's `secrets:`, from SSM with the instance role
    index = join_cluster(store, attempt, launch, env, poll_s, lambda: imds.get(LOCAL_IP_PATH))
    return run_runtime(store, job_url, attempt, index, workdir, env, lambda: imds.get(NOTICE_PATH) is not None,
                       poll_s, runtime_cmd)


def main(argv: list[str] | None = None) -> None:
    args = agent_arguments(argv, "aws", "--imds", "instance metadata base URL")
    sys.exit(run(args.job_url, args.attempt, args.imds, args.poll_s))


if __name__ == "__main__":
    main()
