"""The training curves the job page draws: read from TensorBoard event files without TensorFlow."""

from __future__ import annotations

import json
import subprocess
import sys

from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter


def _write(folder, points, tag="batch_loss"):
    writer = EventFileWriter(str(folder))
    for step, value in points:
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)])
        writer.add_event(event_pb2.Event(wall_time=1.0, step=step, summary=summary))
    writer.close()


def test_scalars_merge_the_attempts_files_by_step_without_importing_tensorflow(tmp_path):
    job = tmp_path / "job"
    _write(job / "tensorboard" / "train", [(1, 2.0), (2, 1.5)])  # attempt 1
    _write(job / "tensorboard" / "train", [(2, 1.5), (3, 1.0)])  # attempt 2 resumes at step 2
    _write(job / "tensorboard" / "validation", [(1, 0.9)], tag="epoch_accuracy")
    probe = (f"import json, sys; from spotfit.ui.scalars import scalars; doc = scalars('file://{job}'); "
             "print(json.dumps({'doc': doc, 'tf': [m for m in sys.modules if m.startswith('tensorflow')]}))")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    assert result["tf"] == []
    assert result["doc"] == {"train/batch_loss": [[1, 2.0], [2, 1.5], [3, 1.0]],
                             "validation/epoch_accuracy": [[1, 0.8999999761581421]]}
