"""TensorBoard servers the dashboard starts on request, one per job, stopped with the dashboard.

Each is `python -m spotfit.ui.tensorboard_socket` in a process of its own (it fetches a remote
store's logs as `spotfit tensorboard` does) serving at `/jobs/JOB/tensorboard` on a Unix socket in
a folder of mode 0700 that this class makes: TensorBoard has no authentication, so it opens no
TCP port at all, and only the dashboard's user can connect. The browser reaches it through the
dashboard's proxy (`tensorboard_proxy.py`), behind the dashboard's token. `start` returns once the
socket accepts connections, so the proxy never meets a closed one.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from spotfit.errors import SpotfitError, UsageError

START_TIMEOUT_S = 60.0
JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # what a path prefix may hold


def prefix(job_id: str) -> str:
    """Where the job's TensorBoard is served, on its socket and through the proxy (no trailing slash)."""
    if not JOB_ID.fullmatch(job_id):
        raise UsageError(f"Invalid job id for TensorBoard: received {job_id!r}, expected letters, digits, '.', '_' "
                         "or '-'.", hint="Open TensorBoard from the job's page.")
    return f"/jobs/{job_id}/tensorboard"


@dataclass
class _Board:
    proc: subprocess.Popen
    folder: Path  # 0700, holds the socket
    errors: IO[str]  # TensorBoard's own chatter: read only if it fails

    @property
    def socket(self) -> str:
        return str(self.folder / "tb.sock")


class TensorBoards:
    """The running TensorBoard processes by job id."""

    def __init__(self, cache: Path):
        self.cache = cache
        self._boards: dict[str, _Board] = {}
        self._lock = threading.Lock()

    def start(self, job_id: str, store_url: str) -> str:
        """The path of the job's TensorBoard through the proxy, started now unless it already runs."""
        where = prefix(job_id)
        with self._lock:
            known = self._boards.get(job_id)
            if known is not None and known.proc.poll() is None:
                return where + "/"
            folder = Path(tempfile.mkdtemp(prefix="spotfit-tb-"))  # mode 0700: no other user may connect
            errors = tempfile.TemporaryFile("w+")  # TensorBoard's own chatter: read only if it fails
            board = _Board(_spawn(store_url, job_id, self.cache, folder / "tb.sock", where, errors), folder, errors)
            try:
                _wait_listening(board)
            except SpotfitError:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            self._boards[job_id] = board
            return where + "/"

    def socket_for(self, job_id: str) -> str | None:
        """The Unix socket of the job's running TensorBoard; None when none runs."""
        with self._lock:
            board = self._boards.get(job_id)
            return board.socket if board is not None and board.proc.poll() is None else None

    def stop_all(self) -> None:
        """Stop every TensorBoard started here (its process group) and remove its socket's folder."""
        with self._lock:
            for board in self._boards.values():
                if board.proc.poll() is None:
                    _signal_group(board.proc, signal.SIGTERM)
                    try:
                        board.proc.wait(15)
                    except subprocess.TimeoutExpired:
                        pass
                _signal_group(board.proc, signal.SIGKILL)  # whatever is left of the group
                board.proc.wait()
                shutil.rmtree(board.folder, ignore_errors=True)
            self._boards.clear()


def _spawn(store_url: str, job_id: str, cache: Path, sock: Path, where: str, errors: IO[str]) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "spotfit.ui.tensorboard_socket", store_url, job_id, str(cache), str(sock), where],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2"})


def _signal_group(proc: subprocess.Popen, signum: int) -> None:
    """Signal the group the process leads (`start_new_session`)."""
    try:
        os.killpg(proc.pid, signum)
    except ProcessLookupError:
        pass


def _wait_listening(board: _Board) -> None:
    """Return once TensorBoard accepts connections on its socket; raise with its error line if it ends or never does."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while board.proc.poll() is None and time.monotonic() < deadline:
        if connectable(board.socket):
            return
        time.sleep(0.2)
    if board.proc.poll() is None:
        _signal_group(board.proc, signal.SIGKILL)
    board.proc.wait()
    raise SpotfitError(f"TensorBoard did not start: {_error_line(board.errors)}",
                       hint="Run `spotfit tensorboard JOB` in a shell to see why.")


def _error_line(errors: IO[str]) -> str:
    """The spotfit error TensorBoard's process ended with (the last line of its stderr otherwise)."""
    errors.seek(0)
    lines = [line for line in errors.read().splitlines() if line.strip()]
    found = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
    return (found or lines[-1:] or ["no output"])[0]


def connectable(sock: str) -> bool:
    """Whether something accepts connections on the Unix socket `sock`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(sock)
            return True
        except OSError:
            return False

