"""A `kind: notebook` attempt: JupyterLab on 127.0.0.1 with the job's token, its folder kept in the store.

The attempt restores the working folder from the job's store (`notebook/files/`), starts
`jupyterlab` bound to 127.0.0.1 on a free port with the job's token (passed in the environment,
never on a command line), and publishes where it listens in
`notebook/server.json`. While it serves it pushes the folder every `notebook_sync_s` seconds
and reports its kernels' last activity (`last_activity_at`) and the utilization of its process
tree in `progress.json`, for the `idle_notebook` rule. It ends:

- on SIGTERM (a preemption, `spotfit cancel`, a rule's stop): stop the server, push, exit 75;
- on `control/stop`: the same, exit 76;
- when JupyterLab exits by itself (File > Shut Down): push, exit 0.

The token is never in the store: a cloud attempt gets it in `$SPOTFIT_NOTEBOOK_TOKEN` from the
backend's secret store (SSM on aws, the attempt's Secret on kubernetes); a local one reads the
0600 file the submitting machine keeps (`token_file`).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from datetime import datetime
from pathlib import Path

from spotfit.attempt import layout
from spotfit.attempt.config import RuntimeConfig
from spotfit.attempt.exit_codes import EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.attempt.notebook import TOKEN_ENV, attempt_dir, token_file
from spotfit.attempt.progress import Phase
from spotfit.attempt.result import encode_result
from spotfit.runtime.reporter import Reporter
from spotfit.runtime.utilization import start_sampling
from spotfit.stores import open_store
from spotfit.stores.folder_sync import FolderSync

START_TIMEOUT_S = 180.0  # JupyterLab's first start on a busy machine builds nothing but is slow to import
STOP_TIMEOUT_S = 20.0
STOP_POLL_S = 2.0


def read_token(job_id: str) -> str:
    """The job's token: from the backend's secret store (the environment), else the local 0600 file."""
    if os.environ.get(TOKEN_ENV):
        return os.environ[TOKEN_ENV]
    path = token_file(job_id)
    if not path.is_file():
        raise RuntimeError(f"no token for notebook {job_id}: ${TOKEN_ENV} is unset and {path} does not exist "
                           "(the job ended, or it runs on another machine without its secret store)")
    return path.read_text().strip()


def serve(config: RuntimeConfig) -> int:
    """Run the notebook attempt to its end; returns the runtime's exit code."""
    store = open_store(config.job_url)
    rep = Reporter(store, config.attempt, config.heartbeat_s)
    term = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: term.set())
    base = attempt_dir(config.job_id, config.attempt)
    work = base / "work"
    files = FolderSync(store, layout.NOTEBOOK_FILES, work)
    restored = files.restore()
    token = read_token(config.job_id)
    port = _free_port()
    log = open(base / "jupyter.log", "ab")  # noqa: SIM115 — open for the server's whole life
    server = subprocess.Popen(_command(port, work), cwd=work,  # kernels start in the working folder
                              stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                              env={**{k: v for k, v in os.environ.items() if k != TOKEN_ENV}, "JUPYTER_TOKEN": token,
                                   "JUPYTER_RUNTIME_DIR": str(base / "runtime")})
    stop_sampling = start_sampling(rep.state, tree=True, sampled=rep.news)
    stop_heartbeat = rep.start_heartbeat()
    try:
        started_at = time.time()
        if not _wait_ready(port, token, server, term):
            if term.is_set():
                return _end(rep, server, files, EXIT_PREEMPTED, "SIGTERM before the server was ready")
            raise RuntimeError(f"JupyterLab did not answer on 127.0.0.1:{port} (exit {server.poll()}); "
                               f"see {base / 'jupyter.log'}")
        store.write_bytes(layout.NOTEBOOK_SERVER, json.dumps({
            "attempt": config.attempt, "host": socket.gethostname(), "port": port, "workdir": str(work),
            "pid": os.getpid(), "started_at": started_at}).encode())
        rep.event("notebook_started", f"JupyterLab on 127.0.0.1:{port}, {restored} file(s) restored",
                  port=port, restored=restored)
        rep.progress(force=True, phase=Phase.SERVING, last_activity_at=started_at, kernels=0)
        return _loop(config, rep, server, files, port, token, term, started_at)
    finally:
        stop_sampling.set()
        stop_heartbeat.set()
        if server.poll() is None:
            _stop_server(server)
        log.close()


def _loop(config: RuntimeConfig, rep: Reporter, server: subprocess.Popen, files: FolderSync, port: int,
          token: str, term: threading.Event, started_at: float) -> int:
    next_sync = time.monotonic() + config.notebook_sync_s
    next_stop_check = 0.0
    last_activity = started_at
    while True:
        if term.wait(1.0):
            return _end(rep, server, files, EXIT_PREEMPTED, "SIGTERM")
        if server.poll() is not None and not term.wait(0.5):  # a group SIGTERM may reach the server first
            code = EXIT_DONE if server.returncode == 0 else 1
            files.push()
            if code == EXIT_DONE:
                rep.store.write_bytes(layout.RESULT, encode_result({"step": None, "weights_sha256": None,
                                                                    "metrics": {}}))
            rep.event("exit", f"JupyterLab exited by itself (code {server.returncode})", code=code)
            return code
        now = time.monotonic()
        if now >= next_stop_check:
            next_stop_check = now + STOP_POLL_S
            if rep.store.exists(layout.STOP):
                return _end(rep, server, files, EXIT_STOPPED, "a stop request")
        activity, kernels = _kernel_activity(port, token)
        if activity is not None:
            last_activity = max(last_activity, activity)
        rep.progress(phase=Phase.SERVING, last_activity_at=last_activity, kernels=kernels)
        if now >= next_sync:
            next_sync = now + config.notebook_sync_s
            files.push()


def _end(rep: Reporter, server: subprocess.Popen, files: FolderSync, code: int, why: str) -> int:
    """Stop the server (its kernels flush what they write), push the folder, report; returns `code`."""
    _stop_server(server)
    pushed = files.push()
    rep.progress(force=True, phase=Phase.STOPPED)
    rep.event("exit", f"notebook stopped on {why}: {pushed} changed file(s) saved (exit {code})", code=code,
              pushed=pushed)
    return code


def _command(port: int, work: Path) -> list[str]:
    return [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
            f"--ServerApp.port={port}", "--ServerApp.port_retries=0", f"--ServerApp.root_dir={work}",
            # Nothing phones out: no update check, no extension manager asking PyPI.
            "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate", "--LabApp.extension_manager=readonly",
            *(["--allow-root"] if os.geteuid() == 0 else [])]  # CI containers run as root


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _get(port: int, path: str, token: str, timeout_s: float = 5.0) -> object:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return json.load(response)


def _wait_ready(port: int, token: str, server: subprocess.Popen, term: threading.Event) -> bool:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and server.poll() is None and not term.is_set():
        try:
            _get(port, "/api/status", token)
            return True
        except (OSError, urllib.error.URLError, ValueError):
            term.wait(0.5)
    return False


def _kernel_activity(port: int, token: str) -> tuple[float | None, int]:
    """(the latest activity of any kernel or terminal, now if one is busy; the number of kernels)."""
    try:
        kernels = _get(port, "/api/kernels", token)
        terminals = _get(port, "/api/terminals", token)
    except (OSError, urllib.error.URLError, ValueError):
        return None, 0
    assert isinstance(kernels, list) and isinstance(terminals, list)
    if any(k.get("execution_state") == "busy" for k in kernels):
        return time.time(), len(kernels)
    stamps = [datetime.fromisoformat(x["last_activity"]).timestamp() for x in [*kernels, *terminals]
              if x.get("last_activity")]
    return (max(stamps) if stamps else None), len(kernels)


def _stop_server(server: subprocess.Popen) -> None:
    if server.poll() is None:
        server.send_signal(signal.SIGTERM)
    try:
        server.wait(STOP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        server.kill()
        server.wait()
