"""Runtime overhead: the same script under plain `model.fit` and under spotfit, side by side.

Runs `step_script.py` alternately as a plain process and as a spotfit attempt (checkpointing at
`interval: auto`), 5 times each, and reports the median wall time per step, their ratio
(target <= 1.03), and the checkpoint save cost and its share of training time (target <= 2%).
The MTBF given to `interval: auto` is us-west-2b's from the bundled trace, scaled by the
demo's time_scale of 300 (a harsh case: one preemption every ~ minute of wall time).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _doc import machine, write_section

from spotfit.market.trace import load_trace, resolve_trace, zone_stats
from spotfit.runtime.config import RuntimeConfig
from spotfit.stores import open_store

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "step_script.py"
HEADING = "## Runtime overhead and checkpoint cost (issue 3)"
REPEATS = 5
TIME_SCALE = 300.0


def _plain(out: Path) -> dict:
    subprocess.run([sys.executable, str(SCRIPT)], check=True, env={**os.environ, "BENCH_OUT": str(out)},
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _spotfit(out: Path, work: Path, mtbf_s: float, n: int) -> dict:
    url = f"file://{work}/job{n}"
    store = open_store(url)
    cfg = RuntimeConfig(job_id="bench", job_url=url, script=str(SCRIPT), workdir=str(HERE), mtbf_s=mtbf_s)
    store.write_bytes("attempts/0001/runtime.json", cfg.to_json().encode())
    subprocess.run([sys.executable, "-m", "spotfit.runtime", url, "1"], check=True,
                   env={**os.environ, "BENCH_OUT": str(out)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    saves = [json.loads(store.read_bytes(k)) for k in store.list("events")]
    saves = [e["data"]["save_s"] for e in saves if e["kind"] == "checkpoint"]
    result["saves"] = saves
    return result


def main() -> None:
    stats = {s.zone: s for s in zone_stats(load_trace(resolve_trace("aws-v100")))}
    mtbf_s = stats["us-west-2b"].mtbf_h * 3600.0 / TIME_SCALE
    plain, spot = [], []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for i in range(REPEATS):
            plain.append(_plain(work / f"plain{i}.json"))
            spot.append(_spotfit(work / f"spot{i}.json", work, mtbf_s, i))
    p = statistics.median(r["s_per_step"] for r in plain)
    s = statistics.median(r["s_per_step"] for r in spot)
    steps = spot[0]["steps"]
    save_costs = [c for r in spot for c in r["saves"]]
    saves_per_run = statistics.median(len(r["saves"]) for r in spot)
    save_total = statistics.median(sum(r["saves"]) for r in spot)
    train_s = s * steps
    section = "\n".join([
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d')} on {machine()}; `python bench/bench_runtime.py`.",
        f"Same script (`bench/step_script.py`, a small conv net on digits, {steps} steps of batch 32),",
        f"alternating plain and spotfit runs, median of {REPEATS} each, first 30 steps excluded.",
        "",
        "| | wall time per step |",
        "|---|---:|",
        f"| plain `model.fit` | {p * 1e3:.3f} ms |",
        f"| under spotfit (`interval: auto`) | {s * 1e3:.3f} ms |",
        f"| ratio spotfit / plain (target <= 1.03) | **{s / p:.3f}** |",
        "",
        f"Checkpoint at `interval: auto` with MTBF {mtbf_s:.0f} wall s (us-west-2b at time_scale {TIME_SCALE:g}):",
        f"{saves_per_run:g} saves per run, median save cost {statistics.median(save_costs) * 1e3:.2f} ms,",
        f"{save_total:.3f} s of saving in {train_s:.2f} s of training: "
        f"**{100 * save_total / train_s:.2f}%** of training time (target <= 2%).",
        "",
    ])
    print(section)
    write_section(HEADING, section)


if __name__ == "__main__":
    main()
