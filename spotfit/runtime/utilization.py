"""Accelerator utilization, sampled in the runtime: NVML on GPUs, the process's CPU elsewhere.

One interface (`sample() -> percent`), two samplers: `NvmlSampler` averages the GPUs' busy
percentage (nvidia-ml-py, in the `tf-gpu` extra); `ProcessCpuSampler` reports the process's
CPU use as a share of all cores. `start_sampling` runs one in a daemon thread and writes the
latest value into the progress the controller reads (`utilization_pct`, `utilization_source`).
"""

from __future__ import annotations

import os
import threading

import psutil

from spotfit.attempt.progress import Progress


class ProcessCpuSampler:
    source = "cpu"

    def __init__(self):
        self._proc = psutil.Process()
        self._proc.cpu_percent(None)  # the first call only starts the measurement
        self._cores = os.cpu_count() or 1

    def sample(self) -> float:
        return min(100.0, self._proc.cpu_percent(None) / self._cores)


class ProcessTreeCpuSampler:
    """The CPU use of this process and all its descendants (a notebook server and its kernels)."""

    source = "cpu"

    def __init__(self):
        self._root = psutil.Process()
        self._procs: dict[int, psutil.Process] = {}
        self._cores = os.cpu_count() or 1
        self.sample()  # the first reading of each process only starts its measurement

    def sample(self) -> float:
        total = 0.0
        alive: dict[int, psutil.Process] = {}
        for proc in [self._root, *self._root.children(recursive=True)]:
            known = self._procs.get(proc.pid, proc)
            try:
                total += known.cpu_percent(None)
            except psutil.NoSuchProcess:
                continue
            alive[proc.pid] = known
        self._procs = alive
        return min(100.0, total / self._cores)


class NvmlSampler:
    source = "nvml"

    def __init__(self):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        if not self._handles:
            raise RuntimeError("no GPU")

    def sample(self) -> float:
        rates = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
        return float(sum(rates)) / len(rates)


def make_sampler(tree: bool = False):
    """NVML when a GPU and nvidia-ml-py are there, else the process's CPU (with `tree`, its descendants' too)."""
    try:
        return NvmlSampler()
    except Exception:  # noqa: BLE001 — no library, no driver or no GPU: fall back
        return ProcessTreeCpuSampler() if tree else ProcessCpuSampler()


def start_sampling(state: Progress, interval_s: float = 1.0, tree: bool = False) -> threading.Event:
    """Sample every `interval_s` into `state`; set the returned event to stop."""
    sampler = make_sampler(tree)
    stop = threading.Event()
    state["utilization_source"] = sampler.source
    state["utilization_pct"] = None  # the key exists before the thread sets it: no dict resize mid-write

    def loop():
        while not stop.wait(interval_s):
            state["utilization_pct"] = round(sampler.sample(), 1)

    threading.Thread(target=loop, name="spotfit-utilization", daemon=True).start()
    return stop
