"""TensorBoard servers the dashboard starts on request, one per job, stopped with the dashboard.

Each is `spotfit tensorboard JOB --port P --json` in a process of its own (the verb fetches a
remote store's logs and serves them on 127.0.0.1); its first line says the URL, and the URL is
handed out once TensorBoard accepts connections there, so the browser never meets a closed port.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from urllib.parse import urlsplit

from spotfit.errors import SpotfitError

START_TIMEOUT_S = 60.0


class TensorBoards:
    """The running TensorBoard processes by job id."""

    def __init__(self) -> None:
        self._procs: dict[str, tuple[subprocess.Popen, str]] = {}
        self._lock = threading.Lock()

    def start(self, job_id: str) -> str:
        """The URL of the job's TensorBoard, started now unless it already runs."""
        with self._lock:
            known = self._procs.get(job_id)
            if known is not None and known[0].poll() is None:
                return known[1]
            errors = tempfile.TemporaryFile("w+")  # TensorBoard's own chatter: read only if it fails
            proc = subprocess.Popen([sys.executable, "-m", "spotfit", "tensorboard", job_id, "--port",
                                     str(_free_port()), "--json"], stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=errors, text=True,
                                    env={**os.environ}, start_new_session=True)
            url = _first_url(proc, errors)
            _wait_listening(proc, url, errors)
            self._procs[job_id] = (proc, url)
            return url

    def stop_all(self) -> None:
        """Stop every TensorBoard started here: the verb's process group (it and its TensorBoard)."""
        with self._lock:
            for proc, _ in self._procs.values():
                if proc.poll() is None:
                    _signal_group(proc, signal.SIGTERM)
                    try:
                        proc.wait(15)
                    except subprocess.TimeoutExpired:
                        pass
                _signal_group(proc, signal.SIGKILL)  # what is left of the group, TensorBoard included
                proc.wait()
            self._procs.clear()


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    """Signal the group the verb leads (`start_new_session`): killing the verb alone would orphan TensorBoard."""
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def _first_url(proc: subprocess.Popen, errors) -> str:
    """The URL of the verb's JSON document (its first output); its error line if it failed."""
    first = threading.Event()
    result: dict[str, str] = {}

    def read() -> None:  # the document, then drain the pipe, so that TensorBoard never blocks on a full one
        assert proc.stdout is not None
        text = ""
        for line in proc.stdout:
            text += line
            if line.rstrip() == "}":  # `--json` prints one indented document
                break
        result["doc"] = text
        first.set()
        for _ in proc.stdout:
            pass

    threading.Thread(target=read, daemon=True).start()
    first.wait(START_TIMEOUT_S)
    try:
        return str(json.loads(result.get("doc", ""))["url"])
    except (ValueError, KeyError, TypeError):
        pass
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    errors.seek(0)
    error = [text for text in errors.read().splitlines() if text.startswith("error:")] or ["no output"]
    raise SpotfitError(f"TensorBoard did not start: {error[0]}",
                       hint="Run `spotfit tensorboard JOB` in a shell to see why.")


def _wait_listening(proc: subprocess.Popen, url: str, errors) -> None:
    """Return once TensorBoard accepts connections at `url`; raise if it ends or never does."""
    where = urlsplit(url)
    deadline = time.monotonic() + START_TIMEOUT_S
    while proc.poll() is None and time.monotonic() < deadline:
        try:
            socket.create_connection((where.hostname, where.port), timeout=1.0).close()
            return
        except OSError:
            time.sleep(0.2)
    if proc.poll() is None:
        proc.kill()
    proc.wait()
    errors.seek(0)
    last = errors.read().strip().splitlines()[-1:] or ["no output"]
    raise SpotfitError(f"TensorBoard did not start listening at {url}: {last[0]}",
                       hint="Run `spotfit tensorboard JOB` in a shell to see why.")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
