"""Runtime overhead: the same script under plain `model.fit` and under spotfit, side by side.

Runs `step_script.py` as a plain process and as a spotfit attempt (checkpointing at
`interval: auto`) under five settings: everything off, each default alone (`mixed_precision:
auto`, `xla: auto`, TensorBoard on) and the defaults a user gets, for three models (`mlp`, a
small MLP with ~2-3 ms steps, 912 steps; `small`, a conv net with ~5-10 ms steps, 456 steps;
`large`, one with ~60-80 ms steps, 320 steps). In each repeat the six runs go in a rotated
order, and each ratio is the median over repeats of spotfit / plain within the repeat, so every
ratio compares runs taken side by side; its spread (the lowest and highest repeat) is shown
beside it.

Per step it reports wall time and CPU time (CPU seconds of the whole process, every thread:
less sensitive to other load on a shared machine than wall time, and a measure of the work done),
both over every step of the `fit` call (tracing, trial steps, checkpoint saves included) and
after the first epoch, plus the whole process's CPU seconds (start-up and imports included,
from `wait4`). Targets at the defaults: spotfit / plain <= 1.03 after the first epoch and <= 1.05
over all steps (issue 55); checkpoint saves <= 2% of the
`fit` call's wall time. The MTBF given to `interval: auto` is us-west-2b's from the bundled
trace, scaled by the demo's time_scale of 300 (a harsh case: one preemption every ~2 minutes).

Then the trial costs (issue 20, item 3): each model runs one epoch as a spotfit attempt with
both trials forced (`SPOTFIT_TRIAL_BUDGET=1000`), and the events give each trial's extra seconds
(`trial_s` minus its steps at the float32/no-XLA step time) and the cost it predicted; from
them, what the trial costs on a 10,000-step job of the model and whether the default budget
(0.5%) lets it run there.

The unaccounted CPU of a setting: its CPU per step beyond plain `fit`'s, minus what spotfit
accounts to itself (its batch-end callbacks' CPU beyond plain `fit`'s, saves included, and its
threads'), per repeat, the median: a cost nobody looks at shows up there as a number.

`python bench/bench_runtime.py [--repeats N] [--models mlp,small,large] [--no-doc] [--hot-path]`
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

from spotfit.attempt.config import RuntimeConfig
from spotfit.market.trace import load_trace, resolve_trace, zone_stats
from spotfit.runtime import trial
from spotfit.stores import open_store

HERE = Path(__file__).resolve().parent
SCRIPT = HERE / "step_script.py"
HEADING = "## Runtime overhead and checkpoint cost (issue 3)"
TIME_SCALE = 300.0
JOB_STEPS = 10_000  # the job length item 3 of issue 20 bounds the trial cost on
TRIAL_PHASE_STEPS = 11  # precision.PHASE_STEPS == xla.PHASE_STEPS (not imported: they import Keras)
OFF = {"mixed_precision": "off", "xla": "off", "tensorboard": False}
SETTINGS = {  # name -> RuntimeConfig fields; "defaults" leaves every field at its default
    "everything off": OFF,
    "`mixed_precision: auto`": {**OFF, "mixed_precision": "auto", "auto_apply": True},
    "`xla: auto`": {**OFF, "xla": "auto", "auto_apply": True},
    "TensorBoard on": {**OFF, "tensorboard": True},
    "**defaults**": {},
}
PLAIN = "plain `model.fit`"
MODELS = {"mlp": "MLP on flattened digits, batch 32", "small": "conv net on digits, batch 32",
          "large": "wider conv net on 32x32x3, batch 64"}


def _run(cmd: list[str], env: dict) -> float:
    """Run `cmd` to its end; returns the CPU seconds of the process and its waited-for children."""
    with tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            tail = err.read()[-3000:].decode(errors="replace")
            raise subprocess.CalledProcessError(proc.returncode, cmd, stderr=tail)
    return usage.ru_utime + usage.ru_stime


def _env(out: Path, model: str, **extra: str) -> dict:
    return {**os.environ, "BENCH_OUT": str(out), "BENCH_MODEL": model, "GCE_METADATA_IP": "127.0.0.1:9", **extra}


def _plain(out: Path, model: str) -> dict:
    run_cpu_s = _run([sys.executable, str(SCRIPT)], _env(out, model))
    return {**json.loads(out.read_text()), "run_cpu_s": run_cpu_s}


def _spotfit(out: Path, url: str, model: str, mtbf_s: float, fields: dict, **extra: str) -> dict:
    store = open_store(url)
    cfg = RuntimeConfig(job_id="bench", job_url=url, script=str(SCRIPT), workdir=str(HERE), mtbf_s=mtbf_s, **fields)
    store.write_bytes("attempts/0001/runtime.json", cfg.to_json().encode())
    run_cpu_s = _run([sys.executable, "-m", "spotfit.runtime", url, "1"], _env(out, model, **extra))
    result = {**json.loads(out.read_text()), "run_cpu_s": run_cpu_s}
    events = [json.loads(store.read_bytes(k)) for k in store.list("events")]
    result["saves"] = [e["data"]["save_s"] for e in events if e["kind"] == "checkpoint"]
    result["choices"] = {e["kind"]: e["data"] for e in events if e["kind"] in ("precision", "xla")}
    return result


def _choice(runs: list[dict], kind: str) -> str:
    """What `auto` chose in these runs, e.g. `off` or `on (2 of 3)`."""
    picks = [str(r["choices"][kind].get("choice") or r["choices"][kind].get("policy") or "script's own")
             if kind in r["choices"] else "n/a" for r in runs]  # n/a: no event (`auto` had no trial to run)
    common = max(set(picks), key=picks.count)
    return common if picks.count(common) == len(picks) else f"{common} ({picks.count(common)} of {len(picks)})"


def _spotfit_threads_s(run: dict) -> float:
    """CPU seconds that spotfit's own threads (named `spotfit-*`) spent during the `fit` call."""
    return sum(cpu for name, cpu in run["thread_cpu_s"].items() if name.startswith("spotfit-"))


def _ratio(runs: list[dict], plain: list[dict], key: str) -> float:
    """Median over repeats of spotfit / plain within each repeat."""
    return statistics.median(r[key] / p[key] for r, p in zip(runs, plain, strict=True))


def _ratio_cell(runs: list[dict], plain: list[dict], key: str) -> str:
    """The median ratio and its spread over repeats, e.g. `1.012 (0.981-1.040)`."""
    ratios = [r[key] / p[key] for r, p in zip(runs, plain, strict=True)]
    return f"{statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f})"


def _unaccounted_s(runs: list[dict], plain: list[dict]) -> float:
    """CPU seconds per step beyond plain `fit`'s that spotfit does not account to itself (median over repeats).

    Accounted: the batch-end dispatch's CPU beyond plain's (spotfit's callbacks, saves at a batch end
    included) and spotfit's threads'. Whatever else a step costs more (the runtime's own imports are
    outside `fit`) is unaccounted.
    """
    return statistics.median(
        (r["cpu_s_per_step"] - p["cpu_s_per_step"])
        - ((r["batch_end_cpu_s"] - p["batch_end_cpu_s"]) + _spotfit_threads_s(r)) / r["steps"]
        for r, p in zip(runs, plain, strict=True))


def _bench_model(model: str, repeats: int, mtbf_s: float, work: Path) -> tuple[list[str], dict]:
    runs: dict[str, list[dict]] = {PLAIN: [], **{name: [] for name in SETTINGS}}
    names = list(runs)
    for i in range(repeats):
        for k, name in enumerate(names[i % len(names):] + names[:i % len(names)]):  # rotate the order
            out = work / f"{model}-{i}-{k}.json"
            if name == PLAIN:
                runs[name].append(_plain(out, model))
            else:
                runs[name].append(_spotfit(out, f"file://{work}/{model}-{i}-{k}", model, mtbf_s, SETTINGS[name]))
        print(f"{model}: repeat {i + 1} of {repeats} done", file=sys.stderr, flush=True)
    plain = runs[PLAIN]
    p = statistics.median(r["s_per_step"] for r in plain)
    lines = [
        f"**{model}** ({MODELS[model]}, {plain[0]['steps']} steps): plain `model.fit` {p * 1e3:.2f} ms per step.",
        "",
        "| setting | wall ms/step | wall spotfit/plain | after 1st epoch | CPU ms/step | CPU spotfit/plain "
        "| after 1st epoch | batch-end CPU µs, median step | spotfit threads CPU µs/step | unaccounted CPU µs/step "
        "| whole process CPU s | precision | XLA |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---|",
    ]
    for name, rs in runs.items():
        med = {k: statistics.median(r[k] for r in rs) for k in ("s_per_step", "cpu_s_per_step", "run_cpu_s")}
        batch_end_us = statistics.median(r["batch_end_cpu_s_median"] for r in rs) * 1e6
        threads_us = statistics.median(_spotfit_threads_s(r) / r["steps"] for r in rs) * 1e6
        ratios = " | ".join(_ratio_cell(rs, plain, k) for k in ("s_per_step", "s_per_step_steady"))
        cpu_ratios = " | ".join(_ratio_cell(rs, plain, k) for k in ("cpu_s_per_step", "cpu_s_per_step_steady"))
        unaccounted = "" if name == PLAIN else f"{_unaccounted_s(rs, plain) * 1e6:.0f}"
        choices = "float32 | off" if name == PLAIN else f"{_choice(rs, 'precision')} | {_choice(rs, 'xla')}"
        lines.append(f"| {name} | {med['s_per_step'] * 1e3:.2f} | {ratios} | {med['cpu_s_per_step'] * 1e3:.2f} | "
                     f"{cpu_ratios} | {batch_end_us:.1f} | {threads_us:.1f} | {unaccounted} | {med['run_cpu_s']:.1f} | "
                     f"{choices} |")
    defaults = runs["**defaults**"]
    shares = [sum(r["saves"]) / (r["s_per_step"] * r["steps"]) for r in defaults]
    all_saves = [c for r in defaults for c in r["saves"]]
    reasons = {kind: r["choices"].get(kind, {}).get("reason", "") for r in defaults for kind in ("precision", "xla")}
    figures = {"plain_steady_s": statistics.median(r["s_per_step_steady"] for r in plain),
               "defaults_wall": _ratio(defaults, plain, "s_per_step"),
               "defaults_cpu": _ratio(defaults, plain, "cpu_s_per_step"),
               "defaults_cpu_steady": _ratio(defaults, plain, "cpu_s_per_step_steady"),
               "unaccounted_share": _unaccounted_s(defaults, plain) / statistics.median(
                   r["cpu_s_per_step"] for r in plain),
               "save_share": statistics.median(shares)}
    # The hot path: the median step's batch-end CPU beyond plain fit's (a save's step is not a median step).
    hot_s = statistics.median(r["batch_end_cpu_s_median"] for r in defaults) - statistics.median(
        r["batch_end_cpu_s_median"] for r in plain)
    threads_s = statistics.median(_spotfit_threads_s(r) / r["steps"] for r in defaults)
    own_cpu_s = hot_s + threads_s
    figures["own_cpu_share"] = own_cpu_s / statistics.median(r["cpu_s_per_step"] for r in plain)
    figures["own_share"] = figures["own_cpu_share"] + figures["save_share"]
    lines += [
        "",
        f"spotfit's own work at the defaults, accounted: the CPU of its batch-end callbacks on a median step, "
        f"beyond plain `fit`'s ({hot_s * 1e6:.1f} µs), and of its threads ({threads_s * 1e6:.1f} µs per step): "
        f"{own_cpu_s * 1e6:.1f} µs per step, **{100 * figures['own_cpu_share']:.2f}%** of "
        f"plain `fit`'s CPU time per step; with the checkpoint saves below, "
        f"**{100 * figures['own_share']:.2f}%** (hot path target < 3%). Unaccounted at the defaults: "
        f"**{100 * figures['unaccounted_share']:.2f}%** of plain `fit`'s CPU per step.",
        "",
        f"Checkpoints at the defaults: {statistics.median(len(r['saves']) for r in defaults):g} saves per run "
        f"(the first step's, which measures the save cost, the periodic ones and the end's), median save "
        f"{statistics.median(all_saves) * 1e3:.2f} ms: **{100 * figures['save_share']:.2f}%** of the `fit` call's "
        f"wall time (median over runs; target <= 2%). `auto` at the defaults, last run: precision: "
        f"{reasons.get('precision') or 'n/a'}; XLA: {reasons.get('xla') or 'n/a'}.",
        "",
    ]
    return lines, figures


def _trial_costs(model: str, repeats: int, work: Path, step_s: float) -> list[str]:
    """Forced trials (one epoch each): their extra seconds, predicted cost and share of a 10,000-step job."""
    found: dict[str, list[dict]] = {"precision": [], "xla": []}
    for i in range(repeats):
        out = work / f"{model}-trial-{i}.json"
        run = _spotfit(out, f"file://{work}/{model}-trial-{i}", model, 3600.0, {"auto_apply": True},
                       BENCH_EPOCHS="1", **{trial.BUDGET_ENV: "1000"})
        for kind in found:
            found[kind].append(run["choices"].get(kind, {}))
    rows = []
    budget_s = trial.BUDGET_SHARE * JOB_STEPS * step_s
    for kind, docs in found.items():
        key = "candidate_step_s" if kind == "precision" else "on_step_s"
        docs = [d for d in docs if d.get(key)]  # trials that ran to their end
        if not docs:
            rows.append(f"| {model} | {kind} | did not run | | | | | |")
            continue
        extra = statistics.median(d["trial_s"] - TRIAL_PHASE_STEPS * d["off_step_s"] for d in docs)
        predicted = statistics.median(d["predicted_s"] for d in docs)
        runs_at_default = predicted <= budget_s
        share = extra / (JOB_STEPS * step_s) if runs_at_default else 0.0
        from_steps = predicted / (trial.BUDGET_SHARE * step_s)
        picks = ", ".join(str(d.get("policy") or d.get("choice")) for d in docs)
        rows.append(f"| {model} | {kind} | {statistics.median(d['trial_s'] for d in docs):.2f} | {extra:.2f} | "
                    f"{predicted:.2f} | {100 * extra / (JOB_STEPS * step_s):.2f}% | "
                    f"{'runs' if runs_at_default else 'skipped'}: **{100 * share:.2f}%** | {from_steps:,.0f} | "
                    f"{picks} |")
    return rows


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
    callbacks = {"main callback": instrument.SpotfitCallback(session, None, [keras.callbacks.History()]),
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
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--models", default="mlp,small,large")
    parser.add_argument("--no-doc", action="store_true", help="print the section, leave docs/benchmarks.md alone")
    parser.add_argument("--hot-path", action="store_true", help="only the in-process hot-path figures")
    args = parser.parse_args()
    if args.hot_path:
        print(hot_path_us())
        return
    stats = {s.zone: s for s in zone_stats(load_trace(resolve_trace("aws-v100")))}
    mtbf_s = stats["us-west-2b"].mtbf_h * 3600.0 / TIME_SCALE
    t0 = time.time()
    load_before = os.getloadavg()
    body: list[str] = []
    trial_rows: list[str] = []
    summary = []
    with tempfile.TemporaryDirectory() as tmp:
        for model in args.models.split(","):
            lines, figures = _bench_model(model, args.repeats, mtbf_s, Path(tmp))
            body += lines
            summary.append(f"{model} {figures['defaults_wall']:.3f} wall, {figures['defaults_cpu']:.3f} CPU "
                           f"({figures['defaults_cpu_steady']:.3f} after the 1st epoch), spotfit's own work "
                           f"accounted {100 * figures['own_share']:.2f}%, unaccounted "
                           f"{100 * figures['unaccounted_share']:.2f}%")
            trial_rows += _trial_costs(model, args.repeats, Path(tmp), figures["plain_steady_s"])
    hot = hot_path_us()
    load_after = os.getloadavg()
    section = "\n".join([
        HEADING,
        "",
        f"Measured {time.strftime('%Y-%m-%d %H:%M', time.gmtime(t0))} UTC on {machine()}; "
        f"`python bench/bench_runtime.py --repeats {args.repeats}` ({(time.time() - t0) / 60:.1f} min; load average "
        f"{load_before[0]:.2f} before, {load_after[0]:.2f} after: the machine was shared with other work).",
        "The same script (`bench/step_script.py`) runs as a plain process and as a spotfit attempt under each",
        f"setting, interleaved in a rotated order, {args.repeats} repeats; each ratio is the median of the",
        "repeats' spotfit / plain. Wall and CPU time per step are taken around the script's `fit` call, so",
        "they count everything spotfit does inside it (tracing, `auto`'s trial steps, checkpoint saves, the",
        "end's save); CPU time is the whole process's, every thread (spotfit's heartbeat, TensorBoard writer",
        "and samplers included), and moves less with other load than wall time does, though a loaded machine",
        "still shifts it by a few percent (compare settings that do the same work); the accounted figures below",
        "read the CPU clocks of spotfit's own threads and of the batch-end dispatch, which load does not inflate.",
        "\"After 1st epoch\" leaves the first",
        "epoch out (tracing, the first save). Whole process CPU s: the process from start to exit, imports",
        f"included. Checkpoints at `interval: auto` with MTBF {mtbf_s:.0f} wall s (us-west-2b at time_scale",
        f"{TIME_SCALE:g}). Targets at the defaults (issue 55): CPU and wall spotfit / plain <= 1.03 after the "
        "1st epoch and <= 1.05 over all steps. Result at the defaults, all steps: "
        + "; ".join(summary) + ".",
        "",
        *body,
        f"**What `auto`'s trials cost** (issue 20). Each model ran one epoch as a spotfit attempt with both trials "
        f"forced (`{trial.BUDGET_ENV}=1000`), {args.repeats} runs, medians. Extra seconds = the trial's `trial_s` "
        f"minus its {TRIAL_PHASE_STEPS} steps at the float32 / no-XLA step time (what the plain script would have "
        "spent on them); the predicted cost is what the trial's gate computed before running it (runtime/trial.py). "
        f"On a {JOB_STEPS:,}-step job at the plain step time after the first epoch, the default budget "
        f"({trial.BUDGET_SHARE:.1%}) lets a trial run only when its prediction fits; a skipped trial costs nothing "
        "(the float32 / no-XLA phase is the plain script's own steps).",
        "",
        f"| model | trial | trial_s | extra s | predicted s | extra / {JOB_STEPS:,}-step job, forced | "
        f"at the default budget on {JOB_STEPS:,} steps | runs from (steps) | chose |",
        "|---|---|---:|---:|---:|---:|---|---:|---|",
        *trial_rows,
        "",
        "The per-step hot path (`on_train_batch_end`, measured in process over 20,000 calls on a tiny model,",
        "saves included): " + ", ".join(f"{k} {v:.1f} µs" for k, v in hot.items()) + ".",
        "",
    ])
    print(section)
    if not args.no_doc:
        write_section(HEADING, section)


if __name__ == "__main__":
    main()
