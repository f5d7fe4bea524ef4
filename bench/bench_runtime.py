"""Runtime overhead: the same script under plain `model.fit` and under spotfit, side by side.

Runs `step_script.py` as a plain process and as a spotfit attempt (checkpointing at
`interval: auto`) under five settings: everything off, each default alone (`mixed_precision:
auto`, `xla: auto`, TensorBoard on) and the defaults a user gets, for two models (`small`, a
conv net with ~5 ms steps; `large`, one with ~60 ms steps). The runs of one repeat are
interleaved, so every ratio compares runs taken side by side. It reports the median wall time
per step over every step from the start of training (tracing, trial steps and checkpoints
included), its ratio to plain `fit` (target at the defaults <= 1.03), what `auto` chose, and
the checkpoint save cost and its share of training time (target <= 2%).
The MTBF given to `interval: auto` is us-west-2b's from the bundled trace, scaled by the
demo's time_scale of 300 (a harsh case: one preemption every ~ minute of wall time).
`python bench/bench_runtime.py [--repeats N] [--models small,large] [--no-doc]`
"""

from __future__ import annotations

import argparse
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
TIME_SCALE = 300.0
WARMUP_STEPS = 30  # step_script.py's WARMUP
OFF = {"mixed_precision": "off", "xla": "off", "tensorboard": False}
SETTINGS = {  # name -> RuntimeConfig fields; "defaults" leaves every field at its default
    "everything off": OFF,
    "`mixed_precision: auto`": {**OFF, "mixed_precision": "auto"},
    "`xla: auto`": {**OFF, "xla": "auto"},
    "TensorBoard on": {**OFF, "tensorboard": True},
    "**defaults**": {},
}
MODELS = {"small": "conv net on digits, batch 32", "large": "wider conv net on 32x32x3, batch 64"}


def _env(out: Path, model: str) -> dict:
    return {**os.environ, "BENCH_OUT": str(out), "BENCH_MODEL": model}


def _plain(out: Path, model: str) -> dict:
    subprocess.run([sys.executable, str(SCRIPT)], check=True, env=_env(out, model),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads(out.read_text())


def _spotfit(out: Path, url: str, model: str, mtbf_s: float, fields: dict) -> dict:
    store = open_store(url)
    cfg = RuntimeConfig(job_id="bench", job_url=url, script=str(SCRIPT), workdir=str(HERE), mtbf_s=mtbf_s, **fields)
    store.write_bytes("attempts/0001/runtime.json", cfg.to_json().encode())
    subprocess.run([sys.executable, "-m", "spotfit.runtime", url, "1"], check=True, env=_env(out, model),
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    result = json.loads(out.read_text())
    events = [json.loads(store.read_bytes(k)) for k in store.list("events")]
    result["saves"] = [e["data"]["save_s"] for e in events if e["kind"] == "checkpoint"]
    result["choices"] = {e["kind"]: e["data"] for e in events if e["kind"] in ("precision", "xla")}
    return result


def _choice(runs: list[dict], kind: str) -> str:
    """What `auto` chose in these runs, e.g. `off` or `on (2 of 3)`."""
    picks = [str(r["choices"].get(kind, {}).get("choice") or r["choices"].get(kind, {}).get("policy")) for r in runs]
    common = max(set(picks), key=picks.count)
    return common if picks.count(common) == len(picks) else f"{common} ({picks.count(common)} of {len(picks)})"


def _bench_model(model: str, repeats: int, mtbf_s: float, work: Path) -> tuple[list[str], dict]:
    plain: list[dict] = []
    spot: dict[str, list[dict]] = {name: [] for name in SETTINGS}
    names = list(SETTINGS)
    for i in range(repeats):
        plain.append(_plain(work / f"{model}-plain{i}.json", model))
        for k, name in enumerate(names[i % len(names):] + names[:i % len(names)]):  # rotate the order
            url = f"file://{work}/{model}-{i}-{k}"
            spot[name].append(_spotfit(work / f"{model}-{i}-{k}.json", url, model, mtbf_s, SETTINGS[name]))
    p = statistics.median(r["s_per_step"] for r in plain)
    p_steady = statistics.median(r["s_per_step_steady"] for r in plain)
    lines = [
        f"**{model}** ({MODELS[model]}, {plain[0]['steps']} steps): plain `model.fit` {p * 1e3:.2f} ms per step "
        f"({p_steady * 1e3:.2f} ms after the first {WARMUP_STEPS} steps).",
        "",
        "| setting | ms per step | spotfit / plain | after warm-up: spotfit / plain | precision | XLA |",
        "|---|---:|---:|---:|---|---|",
    ]
    for name, runs in spot.items():
        s = statistics.median(r["s_per_step"] for r in runs)
        steady = statistics.median(r["s_per_step_steady"] for r in runs)
        choices = f"{_choice(runs, 'precision')} | {_choice(runs, 'xla')}"
        lines.append(f"| {name} | {s * 1e3:.2f} | {s / p:.3f} | {steady / p_steady:.3f} | {choices} |")
    defaults = spot["**defaults**"]
    s = statistics.median(r["s_per_step"] for r in defaults)
    saves = statistics.median(len(r["saves"]) for r in defaults)
    save_total = statistics.median(sum(r["saves"]) for r in defaults)
    train_s = s * defaults[0]["steps"]
    all_saves = [c for r in defaults for c in r["saves"]]
    lines += [
        "",
        f"Checkpoints at the defaults: {saves:g} saves per run, "
        f"median save {statistics.median(all_saves) * 1e3:.2f} ms, "
        f"{save_total:.3f} s of saving in {train_s:.2f} s of training: **{100 * save_total / train_s:.2f}%** "
        "of training time (target <= 2%).",
        "",
    ]
    return lines, {"plain_s": p, "defaults_ratio": s / p, "save_share": save_total / train_s}


def hot_path_us(calls: int = 20_000) -> dict[str, float]:
    """Median and mean microseconds of spotfit's `on_train_batch_end` work per step, in process.

    The main callback (progress, NaN check, injected-preemption and stop checks, the interval
    test and the saves it triggers) and the TensorBoard logger at its default, on a tiny real
    model and a `memory://` store.
    """
    import keras
    import numpy as np

    from spotfit.runtime import instrument
    from spotfit.runtime.session import Session
    from spotfit.runtime.tensorboard import TensorBoardLog, TensorBoardLogger

    cfg = RuntimeConfig(job_id="hot", job_url="memory://bench-hot/jobs/j1", script="x", workdir=".", mtbf_s=126.0)
    session = Session(cfg)
    model = keras.Sequential([keras.Input((2,)), keras.layers.Dense(1)])
    model.compile("sgd", "mse")
    model.fit(np.zeros((4, 2)), np.zeros((4, 1)), verbose=0)  # builds the optimizer
    callbacks = {"main callback": instrument.SpotfitCallback(session, 1, None),
                 "TensorBoard logger": TensorBoardLogger(TensorBoardLog(open_store("memory://bench-hot-tb/j1")))}
    out = {}
    for name, cb in callbacks.items():
        cb.set_model(model)
        cb.set_params({"steps": calls, "epochs": 1})
        cb.on_train_begin()
        times = []
        for i in range(calls):
            t0 = time.perf_counter()
            cb.on_train_batch_end(i, {"loss": 0.5})
            times.append(time.perf_counter() - t0)
        out[f"{name} median"] = statistics.median(times) * 1e6
        out[f"{name} mean"] = statistics.fmean(times) * 1e6
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--models", default="small,large")
    parser.add_argument("--no-doc", action="store_true", help="print the section, leave docs/benchmarks.md alone")
    parser.add_argument("--hot-path", action="store_true", help="only the in-process hot-path figures")
    args = parser.parse_args()
    if args.hot_path:
        print(hot_path_us())
        return
    stats = {s.zone: s for s in zone_stats(load_trace(resolve_trace("aws-v100")))}
    mtbf_s = stats["us-west-2b"].mtbf_h * 3600.0 / TIME_SCALE
    load_before = os.getloadavg()
    body: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            lines, _ = _bench_model(model, args.repeats, mtbf_s, Path(tmp))
            body += lines
    hot = hot_path_us()
    load_after = os.getloadavg()
    section = "\n".join([
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M')} UTC on {machine()}; `python bench/bench_runtime.py`",
        f"(load average {load_before[0]:.2f} before, {load_after[0]:.2f} after; the machine was shared with",
        "other work). The same script (`bench/step_script.py`) runs as a plain process and as a spotfit attempt",
        f"under each setting, interleaved, median of {args.repeats}; time per step counts every step from the",
        "start of training (tracing, `auto`'s trial steps and checkpoint saves included; the warm-up column",
        f"leaves out the first {WARMUP_STEPS} steps). Checkpoints at",
        f"`interval: auto` with MTBF {mtbf_s:.0f} wall s (us-west-2b at time_scale {TIME_SCALE:g}). Target at the",
        "defaults: spotfit / plain <= 1.03.",
        "",
        *body,
        "The per-step hot path (`on_train_batch_end`, measured in process over 20,000 calls on a tiny model,",
        "saves included): " + ", ".join(f"{k} {v:.1f} µs" for k, v in hot.items()) + ".",
        "",
    ])
    print(section)
    if not args.no_doc:
        write_section(HEADING, section)


if __name__ == "__main__":
    main()
