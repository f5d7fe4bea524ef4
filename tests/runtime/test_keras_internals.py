"""The guard on the `keras.src` names the runtime patches: quiet on the installed (pinned) Keras,
one line naming the supported versions when a name is gone, also when the runtime is imported."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import keras
import pytest

from spotfit.runtime import keras_internals

ROOT = Path(__file__).resolve().parents[2]


def test_the_installed_keras_has_every_patched_name_and_is_the_pinned_minor_version():
    assert keras_internals.missing() == []
    keras_internals.check()
    assert keras.__version__.startswith(keras_internals.SUPPORTED + ".")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for extra in ("tf-cpu", "tf-gpu"):
        assert f"keras=={keras_internals.SUPPORTED}.*" in extras[extra], extra


def test_a_missing_name_fails_the_check_with_one_line_naming_the_supported_versions(monkeypatch):
    monkeypatch.delattr(keras_internals.trainer, "reduce_per_replica")
    monkeypatch.delattr(keras_internals.base_optimizer.BaseOptimizer, "apply")
    with pytest.raises(keras_internals.UnsupportedKeras) as caught:
        keras_internals.check()
    message = str(caught.value)
    assert "\n" not in message
    assert "keras.src.backend.tensorflow.trainer.reduce_per_replica" in message
    assert "(and 1 more)" in message
    assert f"expected Keras {keras_internals.SUPPORTED}.x" in message
    assert keras.__version__ in message
    assert caught.value.hint is not None and f"keras=={keras_internals.SUPPORTED}.*" in caught.value.hint


def test_a_missing_module_counts_as_missing():
    assert keras_internals.missing([("keras.src.no_such_module", "thing")]) == ["keras.src.no_such_module.thing"]


@pytest.mark.slow  # a new process that imports TensorFlow: `make test`'s, not the fast loop's
def test_importing_the_runtime_against_a_keras_without_a_patched_name_fails_at_import():
    code = ("import keras.src.backend.tensorflow.trainer as t\n"
            "del t.TFEpochIterator\n"
            "import spotfit.runtime.fit_wrapper\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"spotfit\.runtime\.keras_internals\.UnsupportedKeras: Unsupported Keras \S+: .*"
                        r"`keras\.src\.backend\.tensorflow\.trainer\.TFEpochIterator`.*expected Keras 3\.15\.x.*",
                        last), done.stderr[-2000:]


def test_the_installed_tf_keras_has_every_patched_name_and_is_the_pinned_minor_version():
    """Keras 2's room (runtime/keras2/internals.py): checked at its import, pinned in tf-gpu and the Makefile."""
    import tf_keras

    from spotfit.runtime.keras2 import internals

    assert keras_internals.missing(internals.NAMES) == []
    assert tf_keras.__version__.startswith(internals.SUPPORTED + ".")
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert f"tf-keras=={internals.SUPPORTED}.*" in extras["tf-gpu"]
    assert f"--no-deps 'tf-keras=={internals.SUPPORTED}.*'" in (ROOT / "Makefile").read_text()


def test_a_missing_tf_keras_name_fails_the_check_with_one_line(monkeypatch):
    from spotfit.errors import UsageError
    from spotfit.runtime.keras2 import internals

    monkeypatch.delattr(internals.training.Model, "_maybe_load_initial_counters_from_ckpt")
    with pytest.raises(UsageError) as caught:
        internals.check()
    message = str(caught.value)
    assert "\n" not in message and f"expected tf-keras {internals.SUPPORTED}.x" in message
    assert "tf_keras.src.engine.training.Model._maybe_load_initial_counters_from_ckpt" in message
    assert caught.value.hint is not None and f"--no-deps 'tf-keras=={internals.SUPPORTED}.*'" in caught.value.hint
