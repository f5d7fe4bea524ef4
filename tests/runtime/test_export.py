"""Export: written, reloaded and compared before it is published; versions 1, 2, ... with a card."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import numpy as np
import pytest

from spotfit.attempt import registry as registry_layout
from spotfit.runtime import export
from spotfit.stores import open_store
from tests.support.jobs import spotfit_cmd

pytestmark = pytest.mark.slow

SCRIPT = '''
import keras
import numpy as np

rng = np.random.default_rng(0)
x = rng.standard_normal((256, 6)).astype("float32")
y = (x[:, 0] > 0).astype("int32")
keras.utils.set_random_seed(1)
model = keras.Sequential([keras.Input((6,)), keras.layers.Dense(8, activation="relu"),
                          keras.layers.Dense(2, activation="softmax")])
model.compile("adam", "sparse_categorical_crossentropy", metrics=["accuracy"])
model.fit(x, y, batch_size=32, epochs=2, verbose=2)
'''


def _model():
    import keras

    keras.utils.set_random_seed(0)
    model = keras.Sequential([keras.Input((5,)), keras.layers.Dense(4, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.compile("adam", "sparse_categorical_crossentropy")
    rng = np.random.default_rng(0)
    model.fit(rng.standard_normal((64, 5)).astype("float32"), rng.integers(0, 3, 64), epochs=1, verbose=0)
    return model


def test_export_reload_compare_and_version(tmp_path):
    import tensorflow as tf

    model = _model()
    registry = f"file://{tmp_path / 'registry'}"
    options = {"registry": registry, "formats": ["savedmodel", "tflite", "keras"], "name": "tiny"}
    first = export.export(model, options, {"metrics": {"loss": 1.0}})
    second = export.export(model, options, {"metrics": {"loss": 0.5}})
    assert (first["version"], second["version"]) == (1, 2)
    assert registry_layout.versions(open_store(registry), "tiny") == [1, 2]
    assert set(first["formats"]) == {"savedmodel", "tflite", "keras"}
    assert all(f["max_rel_diff"] <= export.tolerance(name) for name, f in first["formats"].items())
    # The published SavedModel predicts what the trained model predicts.
    folder = tmp_path / "registry" / "tiny" / "2"
    x = np.random.default_rng(1).standard_normal((4, 5)).astype("float32")
    reloaded = tf.saved_model.load(str(folder / "savedmodel"))
    np.testing.assert_allclose(reloaded.serve(x).numpy(), model.predict(x, verbose=0), rtol=1e-6, atol=1e-6)
    card = json.loads((folder / registry_layout.CARD).read_text())
    assert card["version"] == 2 and card["metrics"] == {"loss": 0.5} and (folder / "model.tflite").exists()


def test_a_model_that_predicts_differently_is_not_published():
    with pytest.raises(export.ExportError, match="differs"):
        export._check("keras", np.ones((2, 3)), np.ones((2, 3)) * 1.01)


def test_a_half_written_version_is_not_a_version_but_its_number_is_taken(tmp_path):
    registry = open_store(f"file://{tmp_path}")
    registry.write_bytes("m/1/model_card.json", b"{}")
    registry.write_bytes("m/2/savedmodel/saved_model.pb", b"partial")  # upload interrupted, no card
    assert registry_layout.versions(registry, "m") == [1]
    assert registry_layout.next_version(registry, "m") == 3


def test_job_exports_at_the_end_with_a_model_card(tmp_path, spotfit_home, job_spec):
    src = tmp_path / "src" / "train.py"
    src.parent.mkdir()
    src.write_text(SCRIPT)
    spec = job_spec("name: exported\nscript: train.py\nmarket: {trace: null}\n"
                      "export: {formats: [savedmodel, tflite]}\n", script=src)
    for expected_version in (1, 2):
        out = subprocess.run(spotfit_cmd("run", str(spec), "--json"), capture_output=True, text=True, timeout=300,
                             stdin=subprocess.DEVNULL, env=os.environ.copy())
        assert out.returncode == 0, out.stderr[-3000:]
        doc = json.loads(out.stdout)
        folder = spotfit_home / "registry" / "exported" / str(expected_version)
        card = json.loads((folder / registry_layout.CARD).read_text())
        assert card["version"] == expected_version and card["job_id"] == doc["id"]
        assert card["weights_sha256"] == doc["weights_sha256"] and card["step"] == doc["step"] == 16
        assert len(card["spec_hash"]) == 64 and set(card["metrics"]) == {"accuracy", "loss"}
        assert card["data_source"]["script"] == "train.py" and card["data_source"]["fit_inputs"] == [
            "ndarray float32 (256, 6)"]
        assert card["cost"]["usd"] == 0.0  # no market: nothing billed
        assert set(card["formats"]) == {"savedmodel", "tflite"} and (folder / "model.tflite").exists()
        job = Path(doc["store"][len("file://"):])
        kinds = [json.loads(p.read_text())["kind"] for p in sorted((job / "events").glob("*.json"))]
        assert "exported" in kinds and "export_failed" not in kinds


def test_a_failed_export_completes_the_job_with_its_own_exit_code_and_says_so(tmp_path, job_spec):
    from spotfit.cli.jobs import EXIT_EXPORT_FAILED

    src = tmp_path / "src" / "train.py"
    src.parent.mkdir()
    src.write_text(SCRIPT)
    (tmp_path / "blocked").write_text("a file where the registry's folder would be\n")
    spec = job_spec("name: unexported\nscript: train.py\nmarket: {trace: null}\n"
                    f"export: {{registry: 'file://{tmp_path}/blocked/models', formats: [keras]}}\n", script=src)
    out = subprocess.run(spotfit_cmd("run", str(spec), "--json"), capture_output=True, text=True, timeout=300,
                         stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert out.returncode == EXIT_EXPORT_FAILED == 4, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    assert doc["state"] == "completed" and doc["step"] == 16 and len(doc["weights_sha256"]) == 64
    assert "blocked/models" in doc["export"]["error"], doc["export"]
    status = subprocess.run(spotfit_cmd("status", doc["id"]), capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL, env=os.environ.copy())
    assert status.returncode == 0 and "export failed:" in status.stdout and "blocked/models" in status.stdout, status
    as_json = json.loads(subprocess.run(spotfit_cmd("status", doc["id"], "--json"), capture_output=True, text=True,
                                        timeout=60, stdin=subprocess.DEVNULL, env=os.environ.copy()).stdout)
    assert as_json["export"] == doc["export"]
