"""Accelerator utilization and GPU memory, sampled in the runtime: NVML on GPUs, the process's CPU elsewhere.

One interface (`sample() -> percent`), two kinds of sampler: `NvmlSampler` averages the GPUs'
busy percentage (nvidia-ml-py, in the `tf-gpu` extra) and also reads their memory
(`read() -> GpuReading`); `ProcessCpuSampler` reports the process's CPU use as a share of all
cores. `start_sampling` runs one in a daemon thread and writes the latest value into the
progress the controller reads (`utilization_pct`, `utilization_source`; with a GPU also
`gpu`, a `GpuReading` as a dict, which `spotfit status`, the dashboard and TensorBoard show).

Without a GPU nothing GPU-shaped is written (no zeros): `start_sampling`'s `no_gpu` callback
is called once with the reason (the runtime turns it into one `no_gpu` event and one log line).

>>> GpuReading(util_pct=50.0, mem_used_gib=4.0, mem_total_gib=16.0, count=1).as_progress()["mem_pct"]
25.0
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import psutil

from spotfit.attempt.progress import Progress

GIB = 1024**3


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


@dataclass(frozen=True)
class GpuReading:
    """The GPUs of this machine at one moment: mean busy percent, and memory summed over them."""

    util_pct: float
    mem_used_gib: float
    mem_total_gib: float
    count: int

    @property
    def mem_pct(self) -> float:
        return 100.0 * self.mem_used_gib / self.mem_total_gib if self.mem_total_gib else 0.0

    def as_progress(self) -> dict[str, Any]:
        """The `gpu` field of progress.json (rounded; `at`: epoch seconds of the reading)."""
        return {"util_pct": round(self.util_pct, 1), "mem_pct": round(self.mem_pct, 1),
                "mem_used_gib": round(self.mem_used_gib, 2), "mem_total_gib": round(self.mem_total_gib, 2),
                "count": self.count, "at": round(time.time(), 3)}


class NvmlSampler:
    source = "nvml"

    def __init__(self):
        import pynvml

        pynvml.nvmlInit()
        self._nvml = pynvml
        self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        if not self._handles:
            raise RuntimeError("NVML found no GPU")

    def read(self) -> GpuReading:
        rates = [self._nvml.nvmlDeviceGetUtilizationRates(h).gpu for h in self._handles]
        memory = [self._nvml.nvmlDeviceGetMemoryInfo(h) for h in self._handles]
        return GpuReading(util_pct=float(sum(rates)) / len(rates), mem_used_gib=sum(m.used for m in memory) / GIB,
                          mem_total_gib=sum(m.total for m in memory) / GIB, count=len(self._handles))

    def sample(self) -> float:
        return self.read().util_pct


def open_nvml() -> tuple[NvmlSampler | None, str]:
    """An NVML sampler, or None and why not (no library, no driver, no GPU)."""
    try:
        return NvmlSampler(), ""
    except ImportError:
        return None, "nvidia-ml-py is not installed"
    except Exception as exc:  # noqa: BLE001 — NVML's own errors (no driver) and an empty device list
        return None, str(exc) or type(exc).__name__


def start_sampling(state: Progress, interval_s: float = 1.0, tree: bool = False,
                   no_gpu: Callable[[str], None] | None = None,
                   sampled: Callable[[], None] | None = None) -> threading.Event:
    """Sample every `interval_s` into `state`; set the returned event to stop.

    With a GPU the first reading is taken at once (NVML's figures cover the driver's last
    sample period), so `state["gpu"]` holds a reading before training starts. Without one,
    `no_gpu(reason)` is called once. `sampled()` is called after each reading: the reporter
    then writes it at its next heartbeat, also while no step comes (a starved input pipeline
    is what `idle_accelerator` must see).
    """
    nvml, why = open_nvml()
    sampler = nvml or (ProcessTreeCpuSampler() if tree else ProcessCpuSampler())
    stop = threading.Event()
    state["utilization_source"] = sampler.source
    state["utilization_pct"] = None  # the key exists before the thread sets it: no dict resize mid-write
    if nvml is not None:
        state["gpu"] = nvml.read().as_progress()
    elif no_gpu is not None:
        no_gpu(why)

    def loop():
        while not stop.wait(interval_s):
            if nvml is not None:
                reading = nvml.read()
                state["gpu"] = reading.as_progress()  # one new dict: the writer never sees it half-filled
                state["utilization_pct"] = round(reading.util_pct, 1)
            else:
                state["utilization_pct"] = round(sampler.sample(), 1)
            if sampled is not None:
                sampled()

    threading.Thread(target=loop, name="spotfit-utilization", daemon=True).start()
    return stop
