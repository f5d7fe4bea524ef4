"""A job that reached its last step is complete, once: its result is written by the attempt that
trained the last step, never overwritten, and nothing is trained or billed twice.

The window: us-west-2b from 2023-02-27T00:25:16, 3 h of work, 4 h deadline. The default policy
waits 5 ticks, runs on-demand, switches to spot when spot returns (at the 15th tick, step ~21
of 188 on the modeled instance), is reclaimed 2 ticks later and finishes on-demand. That
schedule costs 1.06 × all-on-demand ($10.54 against $9.94): under a floor of 0.05
the policy stays on on-demand, one attempt, so these jobs set the
floor to 0.1 (the default since the chance bound), which keeps the switches this file is about. The trace
clock runs on the steps (`work_h`), so every figure below is the same on any machine.

- undisturbed, the job is billed as the simulator bills that schedule;
- with its controller frozen (SIGSTOP) while the first attempt trains to the end, the
  controller, woken, finds that attempt past the switch's tick: the model ended it there, so
  the modeled rest is launched and billed as before, but those attempts train nothing and the
  result stays the first attempt's (the local process ran ahead of the modeled instance);
- with every notice reaching its attempt only after the process ended (it trained on to the
  end, or found the result written and exited at once), with the later attempts first seen
  after their end, or with the controller's look at the first attempt's end coming long after
  its last read of the progress (the next attempt then starts from the step the first ended
  at, not from the stale one), the model's ends stand: the attempts and the bill are those of
  the undisturbed job;
- with its controller killed (SIGKILL) while the first attempt trains to the end, `spotfit
  resume` adopts that attempt as finished: no controller was there to switch, as on a cloud
  the on-demand instance just ran on; one attempt, billed once.

The script pauses at step 10 until the test says go, so the test, not the machine's speed,
decides what the controller sees.

The jobs run hollow attempts (spotfit/hollow/: market_train.py's shape and flags, no
TensorFlow), whose weights after an exact resume are the hollow reference's; the job of two
workers runs real TensorFlow (a hollow attempt has one worker).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.backends.local import LocalBackend
from spotfit.controller.loop import Controller
from spotfit.hollow import HOLLOW_ENV
from spotfit.sdk import db
from spotfit.state.states import AttemptState
from tests.support.hollow_jobs import reference, write_hollow_spec, write_scenario
from tests.support.job_report import report_also
from tests.support.jobs import spotfit_cmd, spotfit_home_at
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow
SCRIPT = Path(__file__).parent / "scripts" / "market_train.py"
ARGS = ["--epochs", "4"]
TOTAL = 4 * 47
ON_DEMAND_USD_PER_H = 3.06
OVERHEAD_S = 0.2 * 3600
SPEC = """
name: {name}
script: market_train.py
resources: {{workers: {workers}}}
args: ["--epochs", "4", "--pause-at", "{pause_at}", "--pause-dir", "{pause_dir}"]
market: {{trace: aws-v100, zones: [us-west-2b], start: "2023-02-27T00:25:16", time_scale: 600, max_overpay: 0.1}}
checkpoint: {{interval: {{steps: 25}}, keep: 2}}
training: {{seed: 0, deterministic: true}}
work_h: 3
deadline_h: 4
"""


def _cli(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run(spotfit_cmd(*args), capture_output=True, text=True, timeout=timeout,
                          stdin=subprocess.DEVNULL, env=os.environ.copy())


def _json(*args: str) -> dict:
    out = _cli(*args, "--json")
    assert out.returncode in (0, 1), out.stderr[-3000:]
    return json.loads(out.stdout)


def _spec(job_spec, tmp_path: Path, name: str, pause_at: int = 0, workers: int = 1) -> tuple[Path, Path]:
    pause_dir = tmp_path / f"{name}-pause"
    pause_dir.mkdir()
    text = SPEC.format(name=name, pause_at=pause_at, pause_dir=pause_dir, workers=workers)
    spec = job_spec(text, name, script=SCRIPT)
    write_scenario(spec.parent, SCRIPT)  # the hollow attempts' scenario (two workers run the real script)
    return spec, pause_dir


def _rows(job_id: str) -> list[tuple]:
    """Each billed attempt: (market, start s, end s, cost) as the ledger shows it."""
    return [(r["market"], r["start_s"], r["end_s"], r["cost_usd"]) for r in _json("cost", job_id)["rows"]]


def _paused_detached(job_spec, tmp_path: Path, name: str, workers: int = 1) -> tuple[str, Path, int]:
    """Start the job detached; once its first attempt holds at step 10: (job id, pause dir, controller pid)."""
    spec, pause_dir = _spec(job_spec, tmp_path, name, pause_at=10, workers=workers)
    out = _cli("run", str(spec), "--detach", "--json")
    assert out.returncode == 0, out.stderr[-3000:]
    job_id = json.loads(out.stdout)["id"]
    wait_for(lambda: (pause_dir / "paused").exists(), 300, "the first attempt to pause at step 10")
    [attempt] = _json("status", job_id)["attempts"]
    assert attempt["market"] == "on_demand" and attempt["state"] == "running", attempt
    return job_id, pause_dir, db().find_job(job_id)["controller_pid"]


def _exit_record(job_id: str, attempt: int) -> Path:
    store = _json("status", job_id)["store"]
    assert store.startswith("file://"), store
    return Path(store.removeprefix("file://")) / "attempts" / f"{attempt:04d}" / "exit.json"


@pytest.fixture(scope="module")
def undisturbed(tmp_path_factory, request):
    """The job run without interference (hollow attempts): its status document and its ledger rows."""
    tmp = tmp_path_factory.mktemp("undisturbed")
    pause_dir = tmp / "pause"
    pause_dir.mkdir()
    text = SPEC.format(name="undisturbed", pause_at=0, pause_dir=pause_dir, workers=1)
    spec = write_hollow_spec(tmp / "job", text, SCRIPT)
    report_also(request, tmp / "home")
    with spotfit_home_at(tmp / "home"), pytest.MonkeyPatch.context() as mp:
        mp.setenv(HOLLOW_ENV, "1")
        doc = _json("run", str(spec))
        assert doc["state"] == "completed" and doc["step"] == TOTAL, doc
        return doc, _rows(doc["id"])


def test_undisturbed_job_switches_as_the_policy_plans(undisturbed):
    doc, rows = undisturbed
    assert [(a["market"], a["state"]) for a in doc["attempts"]] == [
        ("on_demand", AttemptState.STOPPED), ("spot", AttemptState.PREEMPTED), ("on_demand", AttemptState.COMPLETED)]
    assert doc["weights_sha256"] == reference(SCRIPT, ARGS)["weights_sha256"]


@pytest.mark.parametrize("workers", [1, 2])
def test_an_attempt_that_trained_past_its_modeled_end_keeps_its_result_and_the_bill(
        job_spec, tmp_path, processes, undisturbed, workers, request):
    import psutil

    if workers == 1:  # two workers train with real TensorFlow (multi-worker), one on a hollow attempt
        request.getfixturevalue("hollow")
    base, base_rows = undisturbed
    job_id, pause_dir, pid = _paused_detached(job_spec, tmp_path, f"frozen{workers}", workers)
    controller = psutil.Process(pid)
    processes.append(controller)
    controller.suspend()  # SIGSTOP: the controller sees nothing until the attempt has ended
    try:
        (pause_dir / "go").touch()
        wait_for(lambda: _exit_record(job_id, 1).exists(), 300, "the first attempt to train to the end and exit")
    finally:
        controller.resume()
    final = wait_for(lambda: (d := _json("status", job_id))["controller"] == "finished" and d, 300,
                     "the job to end")
    assert final["state"] == "completed", final
    # Written once, by the attempt that trained the last step: its weights (several workers
    # sum their gradients in another order than one: their weights are their own).
    trained = json.loads((_exit_record(job_id, 1).parent / "result.json").read_text())
    assert final["step"] == TOTAL and final["weights_sha256"] == trained["weights_sha256"] is not None, final
    if workers == 1:
        assert final["weights_sha256"] == base["weights_sha256"]
    assert json.loads(db().find_job(job_id)["result_json"]) == trained
    # The model ended attempt 1 at the switch's tick; the modeled rest is billed as undisturbed.
    assert [(a["market"], a["state"]) for a in final["attempts"]] == [
        (a["market"], a["state"]) for a in base["attempts"]]
    assert _rows(job_id) == base_rows
    # The later attempts trained nothing: each found the training ended, redid no step.
    later = final["attempts"][1:]
    assert all(a["start_step"] == a["end_step"] == TOTAL for a in later), later
    events = _json("logs", job_id)["events"]
    assert {e["attempt"] for e in events if e["kind"] == "already_done"} == {a["number"] for a in later}
    assert not [e for e in events if e["kind"] == "restored"]
    assert _json("cost", job_id)["totals"]["steps_redone"] == 0


class _LateNotice(LocalBackend):
    """The local backend, whose notices reach an attempt only once its process has ended.

    The race it pins down: a notice sent while the attempt exits by itself (an attempt that found
    the result already written exits within a second of its start) is never seen by it.
    """

    def preempt(self, handle, notice_s: float) -> None:
        wait_for(lambda: not self.status(handle).running, 300, "the attempt to end by itself")
        super().preempt(handle, notice_s)


class _LateLook(_LateNotice):
    """Also first seen by the controller once its process has ended (all but the first attempt)."""

    def launch(self, request):
        handle = super().launch(request)
        if request.attempt > 1:
            wait_for(lambda: not self.status(handle).running, 300, "the attempt to end before the first look")
        return handle


class _StaleProgress(_LateNotice):
    """The controller's first look at the first attempt's process comes after that process ended,
    while the progress it last read is from its start (a controller descheduled between the two)."""

    first = None

    def launch(self, request):
        handle = super().launch(request)
        self.first = self.first or handle
        return handle

    def status(self, handle):
        if handle == self.first:
            self.first = None
            wait_for(lambda: not super(_StaleProgress, self).status(handle).running, 300, "the first attempt to end")
        return super().status(handle)


@pytest.mark.usefixtures("hollow")
@pytest.mark.parametrize("backend", [_LateNotice, _LateLook, _StaleProgress])
def test_notices_that_arrive_after_the_process_ended_leave_the_models_ends_and_the_bill(
        job_spec, tmp_path, undisturbed, backend):
    base, base_rows = undisturbed
    spec, _ = _spec(job_spec, tmp_path, "late")
    job_id = sdk.submit(str(spec))
    Controller(db(), job_id, backend=backend()).run()
    final = _json("status", job_id)
    assert final["state"] == "completed" and final["step"] == TOTAL, final
    assert final["weights_sha256"] == base["weights_sha256"], final
    assert [(a["market"], a["state"]) for a in final["attempts"]] == [
        (a["market"], a["state"]) for a in base["attempts"]]
    assert _rows(job_id) == base_rows
    assert [(a["start_step"], a["end_step"]) for a in final["attempts"]] == [(0, TOTAL), (TOTAL, TOTAL), (TOTAL, TOTAL)]
    events = _json("logs", job_id)["events"]
    assert {e["attempt"] for e in events if e["kind"] == "already_done"} == {2, 3}


@pytest.mark.usefixtures("hollow")
def test_an_attempt_that_finished_while_no_controller_watched_is_adopted_as_finished(
        job_spec, tmp_path, undisturbed):
    base, _ = undisturbed
    job_id, pause_dir, pid = _paused_detached(job_spec, tmp_path, "killed")
    os.kill(pid, signal.SIGKILL)
    wait_for(lambda: _json("status", job_id)["controller"] == "gone", 60, "the killed controller to be seen as gone")
    (pause_dir / "go").touch()
    wait_for(lambda: _exit_record(job_id, 1).exists(), 300, "the attempt to train to the end and exit")

    final = _json("resume", job_id)
    assert final["state"] == "completed", final
    assert final["step"] == TOTAL and final["weights_sha256"] == base["weights_sha256"], final
    # No controller switched it: one on-demand attempt, launch overhead and 3 h of work, billed once.
    [attempt] = final["attempts"]
    assert (attempt["market"], attempt["state"], attempt["start_step"], attempt["end_step"]) == (
        "on_demand", AttemptState.COMPLETED, 0, TOTAL)
    assert attempt["trace_end_s"] - attempt["trace_start_s"] == pytest.approx(OVERHEAD_S + 3 * 3600, abs=1e-3)
    [(market, start_s, end_s, cost)] = _rows(job_id)
    assert cost == pytest.approx((end_s - start_s) * ON_DEMAND_USD_PER_H / 3600, abs=1e-5)
    assert _json("cost", job_id)["totals"]["steps_redone"] == 0
    events = _json("logs", job_id)["events"]
    assert [e for e in events if e["kind"] == "adopted"]
    assert not [e for e in events if e["kind"] in ("switch", "launch") and e["attempt"] != 1]
