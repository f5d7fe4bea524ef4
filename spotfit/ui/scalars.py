"""A job's training curves for the dashboard, read from the TensorBoard logs its runtime writes.

The runtime logs `batch_loss` by global step and `epoch_<metric>` by epoch under
`<job prefix>/tensorboard/{train,validation}/` (runtime/tensorboard.py). They are read here
with TensorBoard's own pure-Python record reader and protocol buffers, which never import
TensorFlow. Several attempts write several files; resume is exact, so a step logged twice
has the same value, and the later file wins.

Example:

>>> scalars("file:///nonexistent/job")
{}
"""

from __future__ import annotations

from pathlib import Path

from spotfit.attempt.tensorboard_server import fetch, local_folder
from spotfit.host.home import home


def scalars(job_url: str) -> dict[str, list[tuple[int, float]]]:
    """`{"train/batch_loss": [(step, value), ...], "validation/epoch_accuracy": ..., ...}`, by step."""
    folder = local_folder(job_url)
    if folder is None:  # a remote store: the copy `spotfit tensorboard` keeps, brought up to date
        folder = home() / "cache" / "tensorboard" / job_url.rstrip("/").rsplit("/", 1)[-1]
        folder.mkdir(parents=True, exist_ok=True)
        fetch(job_url, folder)
    if not folder.is_dir():
        return {}
    series: dict[str, dict[int, float]] = {}
    for path in sorted(folder.glob("*/events.out.tfevents.*"), key=lambda p: p.stat().st_mtime):
        for tag, step, value in _read(path):
            series.setdefault(f"{path.parent.name}/{tag}", {})[step] = value
    return {name: sorted(points.items()) for name, points in sorted(series.items())}


def _read(path: Path) -> list[tuple[str, int, float]]:
    """(tag, step, value) of every scalar in one event file; a record still being written ends it."""
    from tensorboard.compat.proto import event_pb2
    from tensorboard.compat.tensorflow_stub import errors
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import PyRecordReader_New

    out: list[tuple[str, int, float]] = []
    reader = PyRecordReader_New(str(path))
    try:
        while True:
            try:
                reader.GetNext()
            except (errors.OutOfRangeError, errors.DataLossError):
                break
            event = event_pb2.Event.FromString(reader.record())
            out.extend((v.tag, int(event.step), float(v.simple_value)) for v in event.summary.value
                       if v.WhichOneof("value") == "simple_value")
    finally:
        reader.file_handle.close()
    return out
