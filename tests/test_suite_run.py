"""An interrupted suite leaves nothing running: `make test`'s runner ends what pytest left (tests/support/suite_run.py).

An inner suite starts what the real one starts and can leak: an embedded PostgreSQL server (its
own session, as the `postgres` fixture starts it), a detached Python process, and a daemon whose
parent has already exited. Then pytest is ended by SIGTERM (a CI runner's or `timeout`'s), SIGINT
(Ctrl-C) or SIGKILL, in the middle of its test. Every one of those processes must be gone when the
runner returns, and the runner must still print its closing line.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import psutil
import pytest

from tests.support.jobs import REPO
from tests.support.suite_run import what
from tests.support.wait import wait_for

INNER = '''
import os, subprocess, sys, time
from pathlib import Path
from tests.support.postgres import PostgresServer

def test_starts_servers_and_hangs():
    out = Path(os.environ["INNER_PIDS"])
    server = PostgresServer()
    server.start()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    daemon = out.with_name("daemon")
    subprocess.run(["sh", "-c", f"sleep 600 & echo $! > {daemon}"], check=True)
    out.write_text(" ".join(str(p) for p in (server.proc.pid, sleeper.pid, int(daemon.read_text()))))
    time.sleep(600)
'''


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGKILL], ids=lambda s: s.name)
def test_pytest_ended_by_a_signal_leaves_no_process_running(tmp_path, sig):
    (tmp_path / "test_inner.py").write_text(INNER)
    pids_file = tmp_path / "pids"
    env = {**os.environ, "INNER_PIDS": str(pids_file), "PYTHONPATH": str(REPO)}
    runner = subprocess.Popen([sys.executable, "-m", "tests.support.suite_run", "-q", "-p", "no:cacheprovider",
                               "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path / "test_inner.py")],
                              cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        wait_for(lambda: pids_file.exists() or runner.poll() is not None, 180, "the inner test to start its servers")
        assert runner.poll() is None, runner.stdout.read().decode()[-3000:] if runner.stdout else ""
        started = [int(p) for p in pids_file.read_text().split()]
        assert all(_alive(p) for p in started)
        pytest_proc = next(c for c in psutil.Process(runner.pid).children() if "pytest" in " ".join(c.cmdline()))
        pytest_proc.send_signal(sig)
        output = runner.communicate(timeout=180)[0].decode()
    finally:
        if runner.poll() is None:
            os.killpg(runner.pid, signal.SIGKILL)
            runner.wait()
    left = [p for p in started if _alive(p)]
    assert not left, f"still running after the runner returned: {left}\n{output[-3000:]}"
    assert "processes outlived pytest and were ended" in output and "suite: " in output, output[-3000:]
    assert runner.returncode != 0


@pytest.mark.parametrize(("argv", "hollow", "kind"), [
    (["/v/bin/python", "-m", "spotfit.runtime", "file:///s/jobs/j", "2"], False, "runtime real"),
    (["/v/bin/python", "-m", "spotfit.runtime", "file:///s/jobs/j", "2"], True, "runtime hollow"),
    (["/v/bin/python", "-m", "spotfit", "run", "job/spotfit.yaml", "--json"], False, "spotfit run"),
    (["/v/bin/spotfit", "--json", "status", "j"], False, "spotfit status"),
    (["/v/bin/python3.11", "-u", "-m", "tests.support.plain_run", "x"], False, "tests.support.plain_run"),
    (["/v/bin/python", "train.py", "--epochs", "2"], False, "train.py"),
    (["/usr/lib/postgresql/16/bin/postgres", "-D", "/tmp/pg"], False, "postgres"),
    (["/v/bin/python", "-c", "import sys;exec(eval(sys.stdin.readline()))"], False, "pytest"),
])
def test_the_cpu_tally_names_each_kind_of_process(argv, hollow, kind):
    assert what(argv, hollow) == kind
