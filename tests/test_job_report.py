"""A failing end-to-end test explains itself: its report carries the job's status, events and attempt log.

The inner test runs a real job (a real `spotfit run`, a real runtime process) whose script
fails, then fails itself; the outer test reads what pytest printed for it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.job_report import EVENTS, SECTION

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]

CONFTEST = f"""
import sys
sys.path.insert(0, {str(ROOT)!r})
from tests.support.job_report import pytest_runtest_makereport
"""

INNER = """
import json, os, subprocess, sys

def _run(path):
    out = subprocess.run([sys.executable, "-m", "spotfit", "run", str(path), "--json"], capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL, env=os.environ.copy())
    return json.loads(out.stdout)

def test_a_job_that_fails(tmp_path, monkeypatch):
    monkeypatch.setenv("SPOTFIT_HOME", str(tmp_path / "home"))
    (tmp_path / "train.py").write_text("print('the script starts')\\nraise ValueError('a bad learning rate')\\n")
    spec = "name: broken\\nscript: train.py\\nmax_failures: 0\\nmarket: {trace: null}\\n"
    (tmp_path / "spotfit.yaml").write_text(spec)
    assert _run(tmp_path / "spotfit.yaml")["state"] == "completed"

def test_no_job_no_section():
    assert False, "a failure without a job"
"""


def test_a_failing_test_prints_its_jobs_status_events_and_attempt_log(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=2)
    out = result.stdout.str()
    # The job's section, once: under the failing job's test, not under the test without a job.
    assert out.count(SECTION) == 1, out
    job_part = out[out.index("test_a_job_that_fails"):out.index("test_no_job_no_section")]
    assert SECTION in job_part
    result.stdout.fnmatch_lines([
        f"*{SECTION}*",
        "=== job broken-*: failed (*max_failures=0*",
        'status: {*"attempts": [[]{*"exit_code": 1*"state": "failed"*',
        "last * of * events:",
        "  ??:??:?? launch #1: attempt 1: *",
        "  ??:??:?? attempt_failed #1: attempt 1 failed*",
        "attempt 1 (failed, exit 1): last * log lines",
        "    the script starts",
        "    ValueError: a bad learning rate",
    ])
    events_shown = job_part.split("events:", 1)[1].split("attempt 1 (failed", 1)[0].strip().splitlines()
    assert 0 < len(events_shown) <= EVENTS
