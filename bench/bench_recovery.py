"""Recovery latency on this machine: from the preemption notice to the first resumed step.

Runs the digits example with an injected preemption (SIGTERM, 5 s notice) at step 200, 3 times,
and splits the time between the notice and the first step of the resumed attempt into: the
old attempt saving and exiting, the controller relaunching, process start, TF import, restore,
and the script's own set-up plus its first step.
"""

from __future__ import annotations

import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from _doc import machine, write_section

HEADING = "## Recovery latency (issue 6)"
REPEATS = 3
SPEC = """
name: recovery
script: train.py
args: ["--epochs", "6"]
market: {trace: aws-v100, zones: [us-west-2a], start: "2023-02-17T19:16:00", time_scale: 10}
checkpoint: {interval: {steps: 100}, keep: 2}
training: {seed: 0, deterministic: true}
"""


def one_run(work: Path) -> dict:
    os.environ["SPOTFIT_HOME"] = str(work / "home")
    from spotfit import sdk

    shutil.copy(Path(__file__).resolve().parents[1] / "examples" / "digits" / "train.py", work / "train.py")
    (work / "spotfit.yaml").write_text(SPEC)
    job = sdk.submit(str(work / "spotfit.yaml"), preempt_at="200:5")
    doc = sdk.run_job(job)
    assert doc["state"] == "completed", doc
    events = sdk.events(job)
    notice = next(e["ts"] for e in events if e["kind"] == "injected_preemption")
    exited = next(e["ts"] for e in events if e["kind"] == "attempt_preempted")
    launch = [e["ts"] for e in events if e["kind"] == "launch"][1]
    timings = sdk.db().attempts(job)[1]["info"]["timings"]
    first_step = timings["first_step_s"] - timings["tf_import_s"] - timings.get("restore_s", 0.0)
    parts = {
        "save and exit": exited - notice,
        "controller relaunch": launch - exited,
        "process start": timings["process_start_s"],
        "TF import": timings["tf_import_s"],
        "restore": timings.get("restore_s", 0.0),
        "script set-up and first step": first_step,
    }
    parts["total"] = (launch - notice) + timings["process_start_s"] + timings["first_step_s"]
    return parts


def main() -> None:
    runs = []
    for _ in range(REPEATS):
        with tempfile.TemporaryDirectory() as tmp:
            runs.append(one_run(Path(tmp)))
    rows = [f"| {k} | {statistics.median(r[k] for r in runs):.3f} |" for k in runs[0]]
    section = "\n".join([
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; `python bench/bench_recovery.py`.",
        f"Digits example, SIGTERM with 5 s notice at step 200, median of {REPEATS} runs (wall seconds):",
        "",
        "| phase | seconds |",
        "|---|---:|",
        *rows,
        "",
        "The controller polls every 0.1 s; the relaunch waits for the policy's next decision.",
        "",
    ])
    print(section)
    write_section(HEADING, section)


if __name__ == "__main__":
    main()
