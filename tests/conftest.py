"""Shared test setup: every test gets its own SPOTFIT_HOME; nothing reaches a network.

Fixtures here: `spotfit_home`, `no_metadata_connections` and `cli_built_once` (autouse), `job_spec` (a spec folder
beside a script), and the SeaweedFS servers `seaweed` (one per session), `s3_env` (this process pointed at it) and
`own_seaweed` (a server of one test alone, which the test may stop and start), the GCS API
server `gcs` (gcp-storage-emulator, one per session) and `gcs_env` (this process pointed at it),
and `postgres` (one PostgreSQL server per session, on 127.0.0.1). Helpers are imported by module path from
`tests.support`. A test that fails reports the jobs it ran: their `status`, last events and
attempt logs (`tests/support/job_report.py`).
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from spotfit.hollow import HOLLOW_ENV
from tests.support import cli_once, heavy, references
from tests.support.gcs import GcsEmulator
from tests.support.job_report import pytest_runtest_makereport  # noqa: F401 - a failing test reports its jobs
from tests.support.jobs import DIGITS, write_spec
from tests.support.metadata_guard import guard
from tests.support.postgres import PostgresServer
from tests.support.seaweed import SeaweedServer, require_weed, seaweed_env

# pytester: tests/test_job_report.py runs an inner pytest; cpu_per_test: per-test CPU, on demand (docs/testing.md)
pytest_plugins = ["pytester", "tests.support.cpu_per_test"]

# Never let TF probe a metadata server (DESIGN.md): a closed loopback port.
os.environ.setdefault("GCE_METADATA_IP", "127.0.0.1:9")
os.environ.setdefault("GCE_METADATA_HOST", "127.0.0.1:9")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# Nor botocore's credential chain (every child process inherits this): no instance metadata lookup.
os.environ["AWS_EC2_METADATA_DISABLED"] = "true"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `heavy` the tests `tests/heavy.txt` lists (`make check` leaves them to `make test`)."""
    listed = heavy.listed()
    for item in items:
        if item.nodeid in listed:
            item.add_marker(pytest.mark.heavy)


def pytest_unconfigure(config: pytest.Config) -> None:
    """Let the process end without one last collection over everything it imported.

    A worker that imported TensorFlow holds millions of objects; the collections of the
    interpreter's finalization walked them for 3-4 s after the last test (`make check` waited for
    both workers). Frozen objects are still freed by reference counting; only cycles left among them
    are not looked for at exit (3-4 s a worker; the ninth pass of docs/benchmarks.md, in git history)."""
    gc.freeze()


@pytest.fixture(scope="session", autouse=True)
def reference_runs(tmp_path_factory, worker_id) -> Path:
    """This pytest run's folder of reference runs (tests/support/references.py), shared by its xdist workers."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if worker_id != "master" else base) / "references"
    os.environ[references.ROOT_ENV] = str(root)
    return root


@pytest.fixture(autouse=True)
def no_metadata_connections() -> Iterator[list[str]]:
    """Fail the test that tries to reach a cloud metadata address (169.254.169.254,
    metadata.google.internal); the attempt itself is refused at once. Yields what was attempted."""
    with guard() as attempts:
        yield attempts
        if attempts:
            pytest.fail(f"the test tried to reach a cloud metadata address: {', '.join(attempts)}", pytrace=False)


@pytest.fixture(autouse=True)
def cli_built_once(monkeypatch) -> None:
    """typer's CliRunner reuses one click command of the CLI (tests/support/cli_once.py)."""
    cli_once.install(monkeypatch)


@pytest.fixture(autouse=True)
def spotfit_home(tmp_path, reference_runs, monkeypatch) -> Path:
    """Each test's own `$SPOTFIT_HOME`; `$HOME` is this pytest run's temporary folder (its workers'
    and the reference runs' folders are inside), so the folders a test makes are inside "the home"
    a job spec may write to (confine.py) and nothing reads or writes the real home."""
    home = tmp_path / "spotfit-home"
    monkeypatch.setenv("SPOTFIT_HOME", str(home))
    monkeypatch.setenv("HOME", str(reference_runs.parent))
    return home


@pytest.fixture
def hollow(monkeypatch) -> None:
    """Jobs started by this test run hollow attempts (spotfit/hollow/, tests/support/hollow_jobs.py)."""
    monkeypatch.setenv(HOLLOW_ENV, "1")


@pytest.fixture
def job_spec(tmp_path) -> Callable[..., Path]:
    """`job_spec(text, name="job", script=digits/train.py)`: a spec in tmp_path/name, script beside it."""
    def write(text: str, name: str = "job", script: Path = DIGITS / "train.py") -> Path:
        return write_spec(tmp_path / name, text, script=script)

    return write


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory) -> Iterator[SeaweedServer]:
    """One SeaweedFS server for the whole session (tests use their own prefixes in its bucket)."""
    server = SeaweedServer(tmp_path_factory.mktemp("seaweed"), require_weed())
    server.start()
    yield server
    server.stop()


@pytest.fixture
def s3_env(seaweed, monkeypatch) -> SeaweedServer:
    """`seaweed`, with this process's environment pointing s3:// at it."""
    for name, value in seaweed_env(seaweed).items():
        monkeypatch.setenv(name, value)
    return seaweed


@pytest.fixture(scope="session")
def gcs() -> Iterator[GcsEmulator]:
    """One GCS API server (gcp-storage-emulator) for the whole session, bucket `tests.support.gcs.BUCKET`."""
    server = GcsEmulator()
    server.start()
    yield server
    server.stop()


@pytest.fixture
def gcs_env(gcs, monkeypatch) -> GcsEmulator:
    """`gcs`, with this process's environment pointing gs:// at it."""
    for name, value in gcs.env().items():
        monkeypatch.setenv(name, value)
    return gcs


@pytest.fixture
def own_seaweed(tmp_path, monkeypatch) -> Iterator[SeaweedServer]:
    """A SeaweedFS server of this test alone (it may stop and start it), the environment pointing at it."""
    server = SeaweedServer(tmp_path / "seaweed", require_weed())
    server.start()
    for name, value in seaweed_env(server).items():
        monkeypatch.setenv(name, value)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def postgres() -> Iterator[PostgresServer]:
    """One PostgreSQL server for the whole session (tests use schemas of their own: `schema_url`)."""
    server = PostgresServer()
    try:
        server.start()
        yield server
    finally:
        server.stop()
