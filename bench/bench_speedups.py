"""Speed-ups: step time with XLA on/off and under each precision policy, and what auto chose.

For an MLP (784-512-512-10, batch 128) and a small conv net (32x32x3, two conv layers, batch
64), each combination of `jit_compile` (off/on) and dtype policy (float32, mixed_bfloat16,
mixed_float16) trains in its own process: 5 warm-up steps (tracing, XLA compilation), then
the median of `STEPS` timed steps (batch begin to batch end). Then each model runs as a spotfit
attempt with `training.xla: auto` and `mixed_precision: auto`, its trials forced (this 48-step
job is far too short for the default budget, runtime/trial.py, under which it trains in float32
without XLA like its plain script), and the table shows what auto chose and the timings it
measured on the job's own steps.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _doc import machine, write_section

from spotfit.runtime import trial
from spotfit.runtime.xla import PHASE_STEPS

HERE = Path(__file__).resolve().parent
HEADING = "## Speed-ups: XLA and precision (issue 4)"
MODELS = ("mlp", "conv")
POLICIES = ("float32", "mixed_bfloat16", "mixed_float16")
STEPS = {"float32": 40, "mixed_bfloat16": 40, "mixed_float16": 6}  # fp16 is emulated on CPUs

MODEL_CODE = '''
import keras, numpy as np
def build(kind):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    if kind == "mlp":
        x = rng.standard_normal((128 * 8, 784)).astype("float32"); batch = 128
        layers = [keras.Input((784,)), keras.layers.Dense(512, activation="relu"),
                  keras.layers.Dense(512, activation="relu"), keras.layers.Dense(10, activation="softmax")]
    else:
        x = rng.standard_normal((64 * 8, 32, 32, 3)).astype("float32"); batch = 64
        layers = [keras.Input((32, 32, 3)), keras.layers.Conv2D(32, 3, activation="relu"),
                  keras.layers.Conv2D(64, 3, activation="relu"), keras.layers.MaxPooling2D(),
                  keras.layers.Flatten(), keras.layers.Dense(10, activation="softmax")]
    model = keras.Sequential(layers)
    y = rng.integers(0, 10, len(x))
    return model, x, y, batch
'''

ONE = MODEL_CODE + '''
import sys, time, json, statistics
kind, policy, jit, steps = sys.argv[1], sys.argv[2], sys.argv[3] == "on", int(sys.argv[4])
keras.mixed_precision.set_global_policy(policy)
model, x, y, batch = build(kind)
if policy != "float32":
    model.layers[-1].dtype_policy = "float32"
model.compile("adam", "sparse_categorical_crossentropy", jit_compile=jit)
times = []
class T(keras.callbacks.Callback):
    def on_train_batch_begin(self, b, logs=None): self.t = time.perf_counter()
    def on_train_batch_end(self, b, logs=None): times.append(time.perf_counter() - self.t)
model.fit(x, y, batch_size=batch, epochs=1, steps_per_epoch=5 + steps, verbose=0, callbacks=[T()])
print(json.dumps({"step_s": statistics.median(times[5:])}))
'''

SCRIPT = MODEL_CODE + '''
import sys
model, x, y, batch = build(sys.argv[1])
model.compile("adam", "sparse_categorical_crossentropy")
model.fit(x, y, batch_size=batch, epochs=6, verbose=0)  # 48 steps: both trials (44) fit
'''


def _one(kind: str, policy: str, jit: str) -> float:
    out = subprocess.run([sys.executable, "-c", ONE, kind, policy, jit, str(STEPS[policy])], check=True,
                         capture_output=True, text=True, env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"})
    return json.loads(out.stdout.strip().splitlines()[-1])["step_s"]


def _auto(kind: str, work: Path) -> dict:
    """One spotfit attempt with xla and mixed_precision on auto, trials forced; returns its choices."""
    from spotfit.attempt.config import RuntimeConfig
    from spotfit.stores import open_store

    script = work / f"auto_{kind}.py"
    script.write_text(SCRIPT)
    url = f"file://{work}/job-{kind}"
    cfg = RuntimeConfig(job_id="bench", job_url=url, script=str(script), workdir=str(work), args=[kind],
                        interval_steps=10_000, tensorboard=False)
    store = open_store(url)
    store.write_bytes("attempts/0001/runtime.json", cfg.to_json().encode())
    subprocess.run([sys.executable, "-m", "spotfit.runtime", url, "1"], check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL,
                   env={**os.environ, "GCE_METADATA_IP": "127.0.0.1:9", trial.BUDGET_ENV: "1000"})
    events = [json.loads(store.read_bytes(k)) for k in store.list("events")]
    return {e["kind"]: e["data"] for e in events if e["kind"] in ("xla", "precision")}


def main() -> None:
    rows, autos = {}, {}
    t0, load = time.time(), os.getloadavg()
    for kind in MODELS:
        for policy in POLICIES:
            for jit in ("off", "on"):
                rows[kind, policy, jit] = _one(kind, policy, jit)
                print(kind, policy, jit, f"{rows[kind, policy, jit] * 1000:.2f} ms", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for kind in MODELS:
            autos[kind] = _auto(kind, Path(tmp))
            print(kind, "auto", autos[kind], flush=True)

    def ms(v):
        return f"{v * 1000:.2f}"

    lines = [HEADING, "",
             f"Measured on {machine()} (no GPU), {time.strftime('%Y-%m-%d %H:%M', time.gmtime(t0))} UTC, by "
             f"`bench/bench_speedups.py` ({time.time() - t0:.0f} s; load average {load[0]:.2f} before, "
             f"{os.getloadavg()[0]:.2f} after: the machine was shared with other work). "
             "Median step time in ms (batch begin to batch end, after 5 warm-up steps); "
             "each cell its own process. Ratio = XLA on / off.", "",
             "| model | precision | XLA off | XLA on | on/off | vs float32, XLA off |",
             "|---|---|---:|---:|---:|---:|"]
    for kind in MODELS:
        base = rows[kind, "float32", "off"]
        for policy in POLICIES:
            off, on = rows[kind, policy, "off"], rows[kind, policy, "on"]
            lines.append(f"| {kind} | {policy} | {ms(off)} | {ms(on)} | ×{on / off:.2f} | ×{off / base:.2f} |")
    lines += ["", "What `auto` chose in a spotfit attempt of the same model (48 steps, trials forced with "
              f"`{trial.BUDGET_ENV}=1000`: at the default budget a job this short trains in float32 without XLA, "
              f"like its plain script). Each trial measures {PHASE_STEPS - 1} timed steps each way on the job's own "
              "steps (precision first, then XLA); ms per step; the machine is shared, so single runs vary:", "",
              "| model | precision auto | float32 | candidate | XLA auto | XLA off | XLA on |",
              "|---|---|---:|---:|---|---:|---:|"]

    def opt(v):
        return "n/a" if v is None else ms(v)

    for kind in MODELS:
        p, x = autos[kind].get("precision", {}), autos[kind].get("xla", {})
        lines.append(f"| {kind} | {p.get('policy')} | {opt(p.get('off_step_s'))} | "
                     f"{p.get('candidate', '')} {opt(p.get('candidate_step_s'))} | {x.get('choice')} | "
                     f"{opt(x.get('off_step_s'))} | {opt(x.get('on_step_s'))} |")
    lines += ["", "On a GPU the picture changes (tensor cores for fp16/bf16, XLA fusing kernels); only a GPU "
              "run can show it: see docs/speedups.md."]
    write_section(HEADING, "\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
