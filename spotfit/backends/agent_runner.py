"""What every cloud's instance agent does once it knows how to hear a preemption notice.

The AWS agent (IMDSv2 `spot/instance-action`) and the GCP agent (the metadata server's
`instance/preempted`) differ only in where the notice comes from and how the worker learns its
private address. The rest is here: a worker of several waits for the attempt's `cluster.json`
and gets its `TF_CONFIG` (`join_cluster`); the runtime runs in its own process group and a
preemption (the cloud's notice, or `attempts/<n>/preempt.json` from the controller) reaches it
as SIGTERM, once, after which the runtime saves at its step and exits 75; its log is uploaded
and its exit code returned (`run_runtime`).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from spotfit.attempt import layout
from spotfit.backends.attempt_files import tf_config
from spotfit.errors import NotFoundError
from spotfit.stores.base import ObjectStore


def agent_arguments(argv: list[str] | None, cloud: str, metadata_flag: str, what: str) -> argparse.Namespace:
    """`python -m spotfit.backends.<cloud>.agent JOB_URL ATTEMPT <metadata_flag> URL [--poll-s S]`, parsed."""
    parser = argparse.ArgumentParser(prog=f"python -m spotfit.backends.{cloud}.agent")
    parser.add_argument("job_url")
    parser.add_argument("attempt", type=int)
    parser.add_argument(metadata_flag, required=True, help=what)
    parser.add_argument("--poll-s", type=float, default=2.0)
    return parser.parse_args(argv)


def join_cluster(store: ObjectStore, attempt: int, launch: dict[str, Any], env: dict[str, str], poll_s: float,
                 own_ip: Callable[[], str | None]) -> int:
    """This worker's index (0 for a single worker); with several, sets `TF_CONFIG` in `env`.

    `own_ip` asks the cloud's metadata for this worker's private address, found in `cluster.json`.
    """
    if launch.get("workers", 1) <= 1:
        return 0
    cluster = wait_cluster(store, attempt, poll_s)
    index = int(cluster["ips"].index(own_ip()))
    env["TF_CONFIG"] = json.dumps(tf_config(cluster["worker"], index))
    return index


def wait_cluster(store: ObjectStore, attempt: int, poll_s: float, timeout_s: float = 900.0) -> dict[str, Any]:
    """The attempt's `cluster.json`, once the backend has written it (TimeoutError after `timeout_s`)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            return dict(json.loads(store.read_bytes(layout.cluster_file(attempt))))
        except NotFoundError:
            time.sleep(poll_s)
    raise TimeoutError(f"no {layout.cluster_file(attempt)} after {timeout_s:.0f}s")


def run_runtime(store: ObjectStore, job_url: str, attempt: int, index: int, workdir: Path, env: dict[str, str],
                noticed: Callable[[], bool], poll_s: float, runtime_cmd: list[str] | None = None,
                wake: threading.Event | None = None) -> int:
    """Run the runtime to its end, forwarding a preemption as SIGTERM; returns its exit code.

    `noticed`: whether the cloud has given notice (asked every `poll_s` until forwarded);
    `wake`: an event that, set, ends the wait between two checks at once (a notice heard elsewhere).
    """
    log_path = Path(workdir.parent / f"spotfit-attempt-{attempt:04d}.log")
    cmd = runtime_cmd or [sys.executable, "-m", "spotfit.runtime", job_url, str(attempt)]
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
    forwarded = False
    while proc.poll() is None:
        if not forwarded and (store.exists(layout.preempt_file(attempt)) or noticed()):
            forwarded = True
            os.killpg(proc.pid, signal.SIGTERM)
        if wake is None or forwarded:
            time.sleep(poll_s)
        else:
            wake.wait(poll_s)
    store.write_bytes(layout.log(attempt, index), log_path.read_bytes())
    return int(proc.returncode)
