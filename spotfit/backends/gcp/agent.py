"""The instance agent: what the startup script runs on each Compute Engine VM of an attempt.

`python -m spotfit.backends.gcp.agent JOB_URL ATTEMPT --metadata URL`:

1. reads `attempts/<n>/launch.json` from the job's store and unpacks the code (as on AWS);
2. reads the spec's `secrets:` from Secret Manager with the VM's service account (secrets.py)
   into the runtime's environment only;
3. with several workers, waits for `attempts/<n>/cluster.json`, finds its own index by its
   internal address (the metadata server's `instance/network-interfaces/0/ip`) and sets
   `TF_CONFIG`;
4. runs `python -m spotfit.runtime JOB_URL ATTEMPT` in its own process group and forwards a
   preemption as SIGTERM, whichever comes first: the metadata server's `instance/preempted`
   turning `TRUE` (watched with `wait_for_change`: Google's 30 s notice), the ACPI soft-off that
   follows it (the OS sends this agent SIGTERM), or `attempts/<n>/preempt.json` in the store (the
   controller's `preempt`). The runtime then saves at the step it is at and exits 75;
5. uploads its log and exits with the runtime's code; the startup script then powers off.

Every request to the metadata server carries `Metadata-Flavor: Google`, as the server requires.
Its address is a flag, so that tests point it at a loopback server. Steps 3 to 5, but for where the notice and
the address come from, are shared with the other clouds' agents (`backends/agent_runner.py`).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import urllib.error
import urllib.parse
import urllib.request

from spotfit.backends.agent_runner import agent_arguments, join_cluster, run_runtime
from spotfit.backends.attempt_files import unpack_attempt
from spotfit.backends.gcp.secrets import agent_env as agent_secrets
from spotfit.stores import open_store

BASE = "/computeMetadata/v1"
PREEMPTED = f"{BASE}/instance/preempted"
IP = f"{BASE}/instance/network-interfaces/0/ip"


class Metadata:
    """The GCE metadata server: plain GETs with `Metadata-Flavor: Google`, and long polls for changes."""

    def __init__(self, base_url: str, timeout_s: float = 5.0):
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def get(self, path: str, wait: bool = False, last_etag: str | None = None,
            wait_s: int = 60) -> tuple[str, str | None] | None:
        """(value, ETag) at `path`, or None when absent or unreachable; `wait`: block until it changes."""
        query = {"wait_for_change": "true", "timeout_sec": str(wait_s)} if wait else {}
        if wait and last_etag:
            query["last_etag"] = last_etag
        url = f"{self.base_url}{path}" + (f"?{urllib.parse.urlencode(query)}" if query else "")
        req = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s + (wait_s if wait else 0)) as resp:
                return resp.read().decode(), resp.headers.get("ETag")
        except (urllib.error.URLError, OSError, ValueError):
            return None


def watch_preemption(metadata: Metadata, preempted: threading.Event, stop: threading.Event,
                     retry_s: float = 2.0) -> None:
    """Set `preempted` once `instance/preempted` reads TRUE (long polls; retries while unreachable)."""
    etag: str | None = None
    while not stop.is_set() and not preempted.is_set():
        answer = metadata.get(PREEMPTED, wait=etag is not None, last_etag=etag)
        if answer is None:
            stop.wait(retry_s)
            continue
        value, etag = answer
        if value.strip().upper() == "TRUE":
            preempted.set()


def run(job_url: str, attempt: int, metadata_url: str, poll_s: float = 2.0,
        runtime_cmd: list[str] | None = None, preempted: threading.Event | None = None) -> int:
    """Run one worker of an attempt to its end; returns the runtime's exit code.

    `preempted`: set from outside for a preemption (`main` sets it on the agent's own SIGTERM).
    """
    store = open_store(job_url)
    launch, workdir = unpack_attempt(store, attempt)
    metadata = Metadata(metadata_url)
    env = {**os.environ, **launch.get("env", {}), "PYTHONUNBUFFERED": "1"}
    env.update(agent_secrets(store, metadata_url))  # the spec's `secrets:`, from Secret Manager as the VM
    index = join_cluster(store, attempt, launch, env, poll_s, lambda: _own_ip(metadata))
    preempted, stop = preempted or threading.Event(), threading.Event()
    watcher = threading.Thread(target=watch_preemption, args=(metadata, preempted, stop), daemon=True)
    watcher.start()
    code = run_runtime(store, job_url, attempt, index, workdir, env, preempted.is_set, poll_s, runtime_cmd,
                       wake=preempted)  # a notice wakes the loop at once
    stop.set()
    return code


def _own_ip(metadata: Metadata) -> str | None:
    own = metadata.get(IP)
    return own[0] if own else None


def main(argv: list[str] | None = None) -> None:
    args = agent_arguments(argv, "gcp", "--metadata", "metadata server base URL")
    preempted = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: preempted.set())  # the ACPI soft-off, through the OS
    sys.exit(run(args.job_url, args.attempt, args.metadata, args.poll_s, preempted=preempted))


if __name__ == "__main__":
    main()
