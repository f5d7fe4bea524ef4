"""A failing end-to-end test explains itself: its report carries the job's status, events and attempt log.

The inner test runs a real job (a real `spotfit run`, a real runtime process, hollow: its
scenario prints a line, then fails as the script would) whose script fails, then fails itself;
the outer test reads what pytest printed for it.
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

# The first test's job runs in a home that a module fixture of the last test names with
# `report_also` (as a reference run's is): the last test, without a job of its own, reports it.

INNER = """
import json, os, subprocess, sys
import pytest

def _run(path):
    out = subprocess.run([sys.executable, "-m", "spotfit", "run", str(path), "--json"], capture_output=True,
                         text=True, timeout=300, stdin=subprocess.DEVNULL, env=os.environ.copy())
    return json.loads(out.stdout)

def _shared_home(tmp_path_factory):
    return tmp_path_factory.getbasetemp() / "module-home"

def test_a_job_that_fails(tmp_path, tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SPOTFIT_HOME", str(_shared_home(tmp_path_factory)))
    (tmp_path / "train.py").write_text("print('the script starts')\\nraise ValueError('a bad learning rate')\\n")
    scenario = {"prints": ["the script starts"], "fail_at_step": 0, "fail_error": "ValueError",
                "fail_message": "a bad learning rate"}
    (tmp_path / "hollow.json").write_text(json.dumps(scenario))
    spec = "name: broken\\nscript: train.py\\nmax_failures: 0\\nmarket: {trace: null}\\n"
    (tmp_path / "spotfit.yaml").write_text(spec)
    assert _run(tmp_path / "spotfit.yaml")["state"] == "completed"

def test_no_job_no_section():
    assert False, "a failure without a job"

@pytest.fixture(scope="module")
def reference_home(tmp_path_factory, request):
    from tests.support.job_report import report_also
    report_also(request, _shared_home(tmp_path_factory))

def test_a_module_home_is_reported_too(reference_home):
    assert False, "a failure after a module fixture's job"
"""


@pytest.mark.usefixtures("hollow")  # the inner pytest and its job inherit SPOTFIT_HOLLOW=1
def test_a_failing_test_prints_its_jobs_status_events_and_attempt_log(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_inner=INNER)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider")
    result.assert_outcomes(failed=3)
    out = result.stdout.str()
    # The job's section: under the failing job's test and, from the module's home, under the last
    # test; not under the test without a job.
    assert out.count(SECTION) == 2, out
    job_part = out[out.index("_ test_a_job_that_fails _"):out.index("_ test_no_job_no_section _")]
    assert SECTION in job_part
    no_job_part = out[out.index("_ test_no_job_no_section _"):out.index("_ test_a_module_home_is_reported_too _")]
    assert SECTION not in no_job_part
    module_part = out[out.index("_ test_a_module_home_is_reported_too _"):]
    assert f"{SECTION}, of the module's own home" in module_part
    assert "=== job broken-" in module_part and "ValueError: a bad learning rate" in module_part
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
