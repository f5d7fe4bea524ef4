"""Opening the SQLite state DB again in a process never drops the locks its open connections hold.

POSIX advisory locks belong to the process and the file: closing any descriptor of the DB file
releases every lock the process holds on it. In WAL mode an open connection's shared lock on the
DB file tells other processes that it still uses the WAL; without it, another process that
closes its connection believes it is the last, checkpoints and deletes the WAL under this one's
feet: this process's later writes are lost and the file is broken ("disk I/O error", "database
disk image is malformed", as seen with a batch queue killed and resumed). A new `StateDB` of an
existing file must therefore never open and close the file itself.
"""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import threading

from spotfit.state.db import StateDB
from tests.support.wait import wait_for

INSERT = "import sqlite3, sys; c = sqlite3.connect(sys.argv[1], isolation_level=None); " \
         "c.execute('INSERT INTO t VALUES (2)'); c.close()"


def test_a_second_state_db_keeps_the_locks_of_the_connections_open_before_it(tmp_path):
    path = tmp_path / "state.db"
    first = StateDB(str(path))
    mine = sqlite3.connect(str(path), isolation_level=None)  # this process's connection, in WAL mode
    mine.execute("CREATE TABLE t (x INTEGER)")
    mine.execute("INSERT INTO t VALUES (1)")
    StateDB(str(path))  # opened again meanwhile, as the batch queue and the SDK do
    for _ in range(3):  # another process writes and closes; this one writes on
        subprocess.run([sys.executable, "-c", INSERT, str(path)], check=True, timeout=60)
        mine.execute("INSERT INTO t VALUES (3)")
    assert (tmp_path / "state.db-wal").exists()  # still in use: no other process deleted it
    mine.close()
    first.close()
    check = sqlite3.connect(str(path))
    assert check.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    assert check.execute("SELECT count(*) FROM t").fetchall() == [(7,)]  # no write lost


def test_a_new_db_another_process_has_locked_is_waited_for_not_refused(tmp_path, capfd, monkeypatch):
    # Two `spotfit run` started together on a fresh home: one switches the new file to WAL while the
    # other holds its lock, and SQLite answers that switch `database is locked` at once, without its
    # busy handler. Here the lock is held on purpose until the open has said it waits.
    monkeypatch.setenv("SPOTFIT_STATE_BUSY_TIMEOUT_S", "0.1")  # each try's own wait, short
    path = tmp_path / "state.db"
    holder = sqlite3.connect(str(path), isolation_level=None)
    holder.execute("CREATE TABLE t (x INTEGER)")
    holder.execute("BEGIN EXCLUSIVE")
    opened: dict = {}

    def open_db() -> None:
        try:
            StateDB(str(path)).close()
            opened["ok"] = True
        except Exception as exc:  # noqa: BLE001 - the test reports it
            opened["error"] = exc

    thread = threading.Thread(target=open_db)
    thread.start()
    said: list[str] = []

    def waiting() -> bool:
        said.append(capfd.readouterr().err)
        return not thread.is_alive() or "is locked" in "".join(said)

    wait_for(waiting, 60, "the open to wait for the lock (or to end)")
    holder.execute("COMMIT")
    thread.join(timeout=60)
    assert opened == {"ok": True}, opened
    assert "journal_mode" in "".join(said)
    assert sqlite3.connect(str(path)).execute("PRAGMA journal_mode").fetchone() == ("wal",)
