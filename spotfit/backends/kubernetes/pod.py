"""The pod entry: what each pod of an attempt runs after the install step.

`python -m spotfit.backends.kubernetes.pod JOB_URL ATTEMPT`:

1. reads `attempts/<n>/launch.json` from the job's store and unpacks the script's folder;
2. with several workers in an Indexed Job, builds `TF_CONFIG` from its index
   (`JOB_COMPLETION_INDEX`) and the headless Service (`<name>-<i>.<name>.<namespace>.svc`);
   in a TFJob the operator has set it already;
3. runs `python -m spotfit.runtime JOB_URL ATTEMPT` and forwards the kubelet's SIGTERM to it
   (the runtime saves at the step and exits 75); its output goes to the pod's log and to the
   store (`logs/attempt-NNNN.log`, worker i: `-wI`), which `spotfit logs` reads;
4. exits with the runtime's code (128 + signal when a signal ended it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from types import FrameType
from typing import Any

from spotfit.attempt import layout
from spotfit.backends.attempt_files import unpack_attempt
from spotfit.stores import open_store


def tf_config(workers: int, index: int, name: str, namespace: str, port: int) -> dict[str, Any]:
    """The `TF_CONFIG` of worker `index` of an Indexed Job behind its headless Service `name`.

    >>> tf_config(2, 1, "sf-j-1", "ml", 2222)["cluster"]["worker"]
    ['sf-j-1-0.sf-j-1.ml.svc:2222', 'sf-j-1-1.sf-j-1.ml.svc:2222']
    """
    hosts = [f"{name}-{i}.{name}.{namespace}.svc:{port}" for i in range(workers)]
    return {"cluster": {"worker": hosts}, "task": {"type": "worker", "index": index}}


def worker_env(environ: dict[str, str]) -> dict[str, str]:
    """The runtime's environment: the pod's, plus `TF_CONFIG` for a worker of an Indexed Job."""
    env = dict(environ)
    workers = int(env.get("SPOTFIT_WORKERS", "1"))
    if workers > 1 and "TF_CONFIG" not in env:
        config = tf_config(workers, int(env["JOB_COMPLETION_INDEX"]), env["SPOTFIT_SERVICE"],
                           env.get("SPOTFIT_NAMESPACE", "default"), int(env.get("SPOTFIT_WORKER_PORT", "2222")))
        env["TF_CONFIG"] = json.dumps(config)
    return env


def _index(env: dict[str, str]) -> int:
    return int(json.loads(env["TF_CONFIG"])["task"]["index"]) if "TF_CONFIG" in env else 0


def run(job_url: str, attempt: int) -> int:
    """Run this pod's worker of the attempt to its end; returns the exit code for the container."""
    store = open_store(job_url)
    _, workdir = unpack_attempt(store, attempt)
    env = worker_env(dict(os.environ))
    index = _index(env)
    log_key = layout.log(attempt, index)
    proc = subprocess.Popen([sys.executable, "-m", "spotfit.runtime", job_url, str(attempt)], cwd=workdir, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)

    def forward(signum: int, _frame: FrameType | None) -> None:  # the kubelet's SIGTERM: the runtime saves and exits 75
        try:
            os.killpg(proc.pid, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    log = bytearray()
    assert proc.stdout is not None
    for line in proc.stdout:  # the pod's log (kubectl logs) and the store's copy
        sys.stdout.buffer.write(line)
        sys.stdout.flush()
        log += line
    code = proc.wait()
    store.write_bytes(log_key, bytes(log))
    return code if code >= 0 else 128 - code


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2:
        sys.exit("usage: python -m spotfit.backends.kubernetes.pod JOB_URL ATTEMPT")
    sys.exit(run(args[0], int(args[1])))


if __name__ == "__main__":
    main()
