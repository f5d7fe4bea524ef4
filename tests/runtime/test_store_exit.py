"""The runtime's exit code says when the store, not the script, ended an attempt (issue 47).

A store the runtime cannot use where it cannot go on without it (here: its configuration cannot
be read, the job's folder being a file) ends the attempt with `EXIT_STORE` (74), which the
controller records as `failure: store` (tests/controller/test_store_failure.py,
tests/controller/test_store_outage.py). A script that exits with one of the runtime's own codes
is recorded as exiting 1, so it never reads as a preemption or a store failure.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from spotfit.attempt.exit_codes import EXIT_STORE, RESERVED


def test_a_store_the_runtime_cannot_read_ends_the_attempt_with_exit_store(tmp_path):
    (tmp_path / "not-a-folder").write_text("x")
    done = subprocess.run([sys.executable, "-m", "spotfit.runtime", f"file://{tmp_path}/not-a-folder/job", "1"],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == EXIT_STORE == 74, done.stderr
    assert "StoreError: Could not read 'attempts/0001/runtime.json'" in done.stderr


_RUN = """
import sys, types
from spotfit.runtime.main import _run_script
config = types.SimpleNamespace(workdir={folder!r}, script={script!r}, args=[])
print("code", _run_script(config))
"""


@pytest.mark.parametrize("code", [*RESERVED, 3])
def test_a_script_exiting_with_a_code_the_runtime_keeps_is_recorded_as_exit_1(tmp_path, code):
    script = tmp_path / "train.py"
    script.write_text(f"import sys\nsys.exit({code})\n")
    done = subprocess.run([sys.executable, "-c", _RUN.format(folder=str(tmp_path), script=str(script))],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    expected = 1 if code in RESERVED else code
    assert done.stdout.split() == ["code", str(expected)], done.stderr
    assert (f"the script exited {code}, a code spotfit's runtime keeps" in done.stderr) == (code in RESERVED)
