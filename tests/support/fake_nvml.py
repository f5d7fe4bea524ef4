"""A stand-in for NVML (`pynvml`'s API, as nvidia-ml-py ships it), for the GPU path on machines without a GPU.

No GPU is reachable from the test machines, and NVML needs one and its driver: this is the one
place the tests use a stand-in for a real component. It serves two GPUs whose figures are fixed,
so a test can check exactly what reaches progress.json, TensorBoard, `status` and the dashboard.
`install(folder)` writes it as `pynvml.py` into `folder`: put the folder first on `sys.path` (in
process) or on `PYTHONPATH` (a runtime started by a test) and `import pynvml` finds it.
"""

from __future__ import annotations

from pathlib import Path

GIB = 1024**3
UTIL_PCT = (70, 90)  # per GPU: the mean is 80
MEM_USED_GIB = (4, 8)  # of 16 GiB each: 12 of 32 GiB, 37.5%
MEM_TOTAL_GIB = 16
MEAN_UTIL_PCT = 80.0
MEM_PCT = 37.5

SOURCE = f'''"""Fake NVML (tests/support/fake_nvml.py): two GPUs with fixed figures."""
from types import SimpleNamespace

_UTIL = {UTIL_PCT!r}
_USED = {MEM_USED_GIB!r}
_TOTAL = {MEM_TOTAL_GIB!r} * {GIB}
_started = False


def nvmlInit():
    global _started
    _started = True


def nvmlShutdown():
    global _started
    _started = False


def nvmlDeviceGetCount():
    assert _started, "nvmlInit() first"
    return len(_UTIL)


def nvmlDeviceGetHandleByIndex(index):
    return index


def nvmlDeviceGetUtilizationRates(handle):
    return SimpleNamespace(gpu=_UTIL[handle], memory=_UTIL[handle] // 2)


def nvmlDeviceGetMemoryInfo(handle):
    used = _USED[handle] * {GIB}
    return SimpleNamespace(total=_TOTAL, used=used, free=_TOTAL - used)
'''


def install(folder: Path) -> Path:
    """Write the fake as `folder/pynvml.py`; returns the folder."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pynvml.py").write_text(SOURCE)
    return folder
