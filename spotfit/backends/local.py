"""The local backend: each attempt is a child process in its own process group.

It runs `python -m spotfit.runtime JOB_URL N` with the same interpreter, so a laptop can run
the whole system. Preemptions are real signals to the process group: SIGTERM, then SIGKILL
after the notice. Handles carry the pid and the process start time, so that a controller that
restarts can find (adopt) a still-running attempt and never confuse it with a reused pid.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

from spotfit.backends.base import AttemptStatus, LaunchRequest
from spotfit.home import home

_EXIT_KEY = "attempts/{attempt:04d}/exit.json"


class LocalBackend:
    """Run attempts as local processes."""

    name = "local"

    def __init__(self, python: str | None = None):
        self.python = python or sys.executable
        self._children: dict[int, subprocess.Popen] = {}

    def launch(self, request: LaunchRequest) -> str:
        log_path = _log_path(request)
        log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {**os.environ, **request.env, "PYTHONUNBUFFERED": "1"}
        with open(log_path, "ab") as log:
            proc = subprocess.Popen(
                [self.python, "-m", "spotfit.runtime", request.job_url, str(request.attempt)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group: signals reach all of it
            )
        self._children[proc.pid] = proc
        started = psutil.Process(proc.pid).create_time()
        return json.dumps({"pid": proc.pid, "create_time": started, "log": str(log_path)})

    def status(self, handle: str) -> AttemptStatus:
        info = json.loads(handle)
        pid = info["pid"]
        child = self._children.get(pid)
        if child is not None:
            code = child.poll()
            if code is None:
                return AttemptStatus(running=True)
            if code < 0:
                return AttemptStatus(running=False, exit_code=None, signal=-code)
            return AttemptStatus(running=False, exit_code=code)
        if _same_process_alive(pid, info["create_time"]):
            return AttemptStatus(running=True)
        return AttemptStatus(running=False)  # adopted and gone: the exit went unobserved

    def preempt(self, handle: str, notice_s: float) -> None:
        info = json.loads(handle)
        if notice_s <= 0:
            _kill_group(info, signal.SIGKILL)
            return
        _kill_group(info, signal.SIGTERM)
        timer = threading.Timer(notice_s, _kill_group, args=(info, signal.SIGKILL))
        timer.daemon = True
        timer.start()

    def stop(self, handle: str, grace_s: float = 10.0) -> None:
        info = json.loads(handle)
        _kill_group(info, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and self.status(handle).running:
            time.sleep(0.05)
        if self.status(handle).running:
            _kill_group(info, signal.SIGKILL)
        child = self._children.get(info["pid"])
        if child is not None:
            child.wait()


def _log_path(request: LaunchRequest) -> Path:
    """Logs go straight into a file:// store; elsewhere under $SPOTFIT_HOME/logs."""
    key = request.log_key or f"logs/attempt-{request.attempt:04d}.log"
    if request.job_url.startswith("file://"):
        return Path(request.job_url[len("file://"):]) / key
    return home() / "logs" / request.job_id / key


def _same_process_alive(pid: int, create_time: float) -> bool:
    try:
        proc = psutil.Process(pid)
        return abs(proc.create_time() - create_time) < 0.01 and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _kill_group(info: dict, sig: int) -> None:
    """Signal the attempt's process group, only if it is still the process we started."""
    if not _same_process_alive(info["pid"], info["create_time"]):
        return
    try:
        os.killpg(info["pid"], sig)
    except ProcessLookupError:
        pass
