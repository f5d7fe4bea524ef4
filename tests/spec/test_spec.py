"""Tests of the job spec: defaults, the example, round trips, and one-line errors that teach."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from spotfit.errors import SpecError
from spotfit.spec.job import (
    DOCS,
    dump_spec,
    load_spec,
    parse_spec,
)
from spotfit.spec.sections import SecondsInterval, StepsInterval

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "digits" / "spotfit.yaml"
MINIMAL = {"name": "digits", "script": "train.py"}


def _error(raw, source: str = "job.yaml") -> SpecError:
    """The SpecError that `parse_spec` raises for `raw` (fails the test if none is raised)."""
    with pytest.raises(SpecError) as info:
        parse_spec(raw, source=source)
    err = info.value
    assert "\n" not in err.message, "the message must be one line"
    assert err.hint, "every spec error carries a hint"
    assert err.exit_code == 2
    return err


def _write(folder: Path, text: str, script: bool = True) -> Path:
    if script:
        (folder / "train.py").write_text("print('training')\n")
    path = folder / "spotfit.yaml"
    path.write_text(text)
    return path


# good inputs ------------------------------------------------------------------------------------


def test_minimal_spec_gets_defaults():
    spec = parse_spec(dict(MINIMAL))
    assert (spec.name, spec.script, spec.args, spec.env) == ("digits", "train.py", [], {})
    assert spec.backend == "local"
    assert spec.resources.model_dump() == {"accelerator": "V100", "count": 1, "workers": 1, "spot": True}
    assert spec.market.trace == "aws-v100"
    assert spec.market.zones == [] and spec.market.preemptions == []
    assert spec.market.start is None and spec.market.gap_s is None
    assert (spec.market.time_scale, spec.market.policy, spec.market.overhead_h) == (600.0, "default", 0.2)
    assert spec.market.max_overpay == 0.1
    assert spec.checkpoint.model_dump() == {"store": None, "interval": "auto", "keep": 2, "full_wait_s": 600.0}
    assert spec.training.model_dump() == {
        "keras": "auto", "strategy": "auto", "mixed_precision": "auto", "xla": "auto", "auto_apply": False, "seed": 0,
        "deterministic": False,
        "tensorboard": True, "histogram_freq": 0, "tensorboard_update_freq": "auto",
    }
    assert spec.deadline_h is None and spec.work_h is None and spec.budget_usd is None
    assert spec.max_failures == 3
    assert spec.export is None


def test_export_section_defaults_to_savedmodel():
    spec = parse_spec({**MINIMAL, "export": {}})
    assert spec.export.registry is None
    assert spec.export.formats == ["savedmodel"]


def test_digits_example_loads():
    # Compare with the file itself: its numbers get tuned, the mapping to fields must not change.
    raw = yaml.safe_load(EXAMPLE.read_text())
    spec = load_spec(EXAMPLE)
    assert spec.name == raw["name"] == "digits"
    assert spec.script_path == (EXAMPLE.parent / raw["script"]).resolve()
    assert spec.script_path.is_file()
    assert spec.args == raw["args"]
    assert spec.resources.model_dump() == raw["resources"]
    assert spec.market.zones == raw["market"]["zones"]
    assert spec.market.start == datetime.fromisoformat(raw["market"]["start"])
    assert spec.market.time_scale == raw["market"]["time_scale"]
    assert spec.checkpoint.interval == raw["checkpoint"]["interval"]
    assert spec.training.deterministic is raw["training"]["deterministic"]
    assert spec.deadline_h == raw["deadline_h"]


@pytest.mark.parametrize(
    "interval, expected",
    [
        ("auto", "auto"),
        ({"steps": 50}, StepsInterval(steps=50)),
        ({"seconds": 30}, SecondsInterval(seconds=30.0)),
        ({"seconds": 0.5}, SecondsInterval(seconds=0.5)),
    ],
)
def test_checkpoint_interval_forms(interval, expected):
    spec = parse_spec({**MINIMAL, "checkpoint": {"interval": interval}})
    assert spec.checkpoint.interval == expected
    assert type(spec.checkpoint.interval) is type(expected)


def test_script_path_is_relative_to_the_spec_file(tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "fit.py").write_text("")
    spec = load_spec(_write(tmp_path, "name: j\nscript: src/fit.py\n", script=False))
    assert spec.base_dir == str(tmp_path.resolve())
    assert spec.script_path == (tmp_path / "src" / "fit.py").resolve()


def test_preemptions_and_stores_accepted():
    spec = parse_spec({
        **MINIMAL,
        "market": {"preemptions": [{"at_step": 40, "notice_s": 5}, {"at_step": 80, "notice_s": 0}, {"at_step": 90}]},
        "checkpoint": {"store": "s3://bucket/prefix"},
    })
    assert [(p.at_step, p.notice_s) for p in spec.market.preemptions] == [(40, 5.0), (80, 0.0), (90, 5.0)]
    assert spec.checkpoint.store == "s3://bucket/prefix"


# round trip -------------------------------------------------------------------------------------

FULL = {
    "name": "full-job_1.0",
    "script": "train.py",
    "args": ["--epochs", "3"],
    "env": {"TF_CPP_MIN_LOG_LEVEL": "2"},
    "backend": "local",
    "resources": {"accelerator": "A100", "count": 2, "workers": 2, "spot": False},
    "market": {
        "trace": "aws-v100", "zones": ["us-west-2a", "us-west-2b"], "start": "2023-02-19T19:02:01",
        "time_scale": 100, "gap_s": 120, "policy": "greedy", "overhead_h": 0.1,
        "max_overpay": 0.1, "preemptions": [{"at_step": 10, "notice_s": 2.5}],
    },
    "checkpoint": {"store": "memory://ckpt", "interval": {"seconds": 30}, "keep": 3},
    "training": {"strategy": "mirrored", "mixed_precision": "mixed_bfloat16", "xla": "on", "seed": 7,
                 "deterministic": True},
    "deadline_h": 4, "work_h": 2.5, "budget_usd": 10, "max_failures": 0,
    "export": {"registry": "file:///tmp/registry", "formats": ["keras", "tflite"]},
}


@pytest.mark.parametrize("raw", [MINIMAL, FULL, {**MINIMAL, "checkpoint": {"interval": {"steps": 5}}}],
                         ids=["minimal", "full", "steps"])
def test_dump_then_parse_gives_an_equal_spec(raw):
    spec = parse_spec(dict(raw))
    again = parse_spec(yaml.safe_load(dump_spec(spec)))
    assert again == spec
    assert again.spec_hash() == spec.spec_hash()


def test_digits_example_round_trips():
    spec = load_spec(EXAMPLE)
    again = parse_spec(yaml.safe_load(dump_spec(spec)), base_dir=spec.base_dir)
    assert again == spec


def test_dump_leaves_out_base_dir():
    assert "base_dir" not in yaml.safe_load(dump_spec(parse_spec(dict(MINIMAL), base_dir="/somewhere")))


def test_spec_hash_stable_across_key_order():
    reordered = {key: FULL[key] for key in reversed(list(FULL))}
    reordered["market"] = {key: FULL["market"][key] for key in reversed(list(FULL["market"]))}
    a, b = parse_spec(dict(FULL)), parse_spec(reordered)
    assert list(reordered) != list(FULL)
    assert len(a.spec_hash()) == 64
    assert a.spec_hash() == b.spec_hash()


def test_spec_hash_changes_with_content_not_location():
    base = parse_spec(dict(MINIMAL), base_dir="/a")
    assert parse_spec(dict(MINIMAL), base_dir="/b").spec_hash() == base.spec_hash()
    assert parse_spec({**MINIMAL, "args": ["--epochs", "1"]}).spec_hash() != base.spec_hash()
    assert parse_spec({**MINIMAL, "resources": {"count": 2}}).spec_hash() != base.spec_hash()


# bad inputs -------------------------------------------------------------------------------------


def test_unknown_top_level_key_suggests_the_field():
    err = _error({**MINIMAL, "resourcs": {"count": 1}})
    assert "`resourcs`" in err.message
    assert "job.yaml" in err.message
    assert "did you mean `resources`" in err.message
    assert "resources" in err.hint and "training" in err.hint and DOCS in err.hint


def test_unknown_nested_key_suggests_the_field():
    err = _error({**MINIMAL, "resources": {"acelerator": "A100"}})
    assert "`resources.acelerator`" in err.message
    assert "did you mean `accelerator`" in err.message
    assert "accelerator, count, spot, workers" in err.hint


def test_unknown_key_in_a_list_item_suggests_the_field():
    err = _error({**MINIMAL, "market": {"preemptions": [{"at_stp": 3}]}})
    assert "`market.preemptions[0].at_stp`" in err.message
    assert "did you mean `at_step`" in err.message


def test_unknown_key_explains_a_missing_one():
    # `nme` is both unknown and the reason `name` is missing: report the misspelling first.
    err = _error({"nme": "digits", "script": "train.py"})
    assert "did you mean `name`" in err.message
    assert "1 more problem" in err.message


def test_count_zero():
    err = _error({**MINIMAL, "resources": {"count": 0}})
    assert "`resources.count`" in err.message
    assert "received 0" in err.message
    assert "greater than or equal to 1" in err.message
    assert "resources.count" in err.hint


def test_count_not_an_integer():
    err = _error({**MINIMAL, "resources": {"count": "two"}})
    assert "`resources.count`" in err.message
    assert "received 'two'" in err.message
    assert "valid integer" in err.message


def test_xla_lists_the_choices():
    err = _error({**MINIMAL, "training": {"xla": "maybe"}})
    assert "`training.xla`" in err.message
    assert "received 'maybe'" in err.message
    assert "expected one of 'auto', 'on' or 'off'" in err.message


def test_checkpoint_interval_bad_word():
    err = _error({**MINIMAL, "checkpoint": {"interval": "sometimes"}})
    assert "`checkpoint.interval`" in err.message
    assert "received 'sometimes'" in err.message
    assert "expected `auto`, `{steps: N}` or `{seconds: S}`" in err.message


def test_checkpoint_interval_bare_number():
    err = _error({**MINIMAL, "checkpoint": {"interval": 100}})
    assert "`checkpoint.interval`" in err.message
    assert "received 100" in err.message
    assert "`{steps: N}`" in err.message


def test_missing_name():
    err = _error({"script": "train.py"})
    assert "Missing field `name`" in err.message
    assert "required" in err.message
    assert "name:" in err.hint


def test_name_with_spaces():
    err = _error({**MINIMAL, "name": "my job"})
    assert "`name`" in err.message
    assert "received 'my job'" in err.message
    assert "letters, digits" in err.message


def test_store_without_scheme():
    err = _error({**MINIMAL, "checkpoint": {"store": "/no/scheme"}})
    assert "`checkpoint.store`" in err.message
    assert "received '/no/scheme'" in err.message
    assert "expected a URL such as file:///path" in err.message


def test_several_problems_are_counted():
    err = _error({**MINIMAL, "resources": {"count": 0, "workers": 0}})
    assert "`resources.count`" in err.message
    assert "(1 more problem after this one)" in err.message


@pytest.mark.parametrize("raw, kind",
                         [(["a", "b"], "list"), ("name: x", "str"), (None, "an empty document"), (3, "int")])
def test_non_mapping_document(raw, kind):
    err = _error(raw)
    assert "must be a mapping of fields" in err.message
    assert f"received {kind}" in err.message
    assert "job.yaml" in err.message
    assert "examples/digits/spotfit.yaml" in err.hint


def test_non_mapping_file(tmp_path):
    path = _write(tmp_path, "- name: digits\n- script: train.py\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert "must be a mapping of fields, received list" in info.value.message
    assert str(path) in info.value.message


def test_yaml_syntax_error_names_the_line(tmp_path):
    path = _write(tmp_path, "name: digits\nscript: train.py\nresources:\n  count: 1\n   workers: 2\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    err = info.value
    assert "not valid YAML at line 5" in err.message
    assert str(path) in err.message
    assert "\n" not in err.message
    assert "indentation" in err.hint


def test_script_that_does_not_exist(tmp_path):
    path = _write(tmp_path, "name: digits\nscript: missing.py\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    err = info.value
    assert "`script`" in err.message
    assert "received 'missing.py'" in err.message
    assert str((tmp_path / "missing.py").resolve()) in err.message
    assert "relative to the spec file" in err.hint
    # The script check is optional (a controller may validate a spec whose script lives elsewhere).
    assert load_spec(path, check_script=False).script == "missing.py"


def test_spec_file_that_does_not_exist(tmp_path):
    with pytest.raises(SpecError) as info:
        load_spec(tmp_path / "nope.yaml")
    assert "not found" in info.value.message
    assert "nope.yaml" in info.value.message
    assert "spotfit validate" in info.value.hint


def test_errors_name_the_source_file(tmp_path):
    path = _write(tmp_path, "name: digits\nscript: train.py\nresources: {count: 0}\n")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert f"in {path}:" in info.value.message


# regressions of bugs found in review ------------------------------------------------------------


def test_checkpoint_interval_bad_steps_names_the_value():
    err = _error({**MINIMAL, "checkpoint": {"interval": {"steps": 0}}})
    assert "Unknown field" not in err.message
    assert "`checkpoint.interval" in err.message and "received" in err.message


def test_trace_none_round_trips():
    spec = parse_spec({**MINIMAL, "market": {"trace": None}})
    assert parse_spec(yaml.safe_load(dump_spec(spec))) == spec


def test_unquoted_off_is_accepted(tmp_path):
    path = _write(tmp_path, "name: digits\nscript: train.py\ntraining: {xla: off, mixed_precision: off}\n")
    assert load_spec(path).training.xla == "off"
    assert load_spec(path).training.mixed_precision == "off"


# the CLI ----------------------------------------------------------------------------------------


def _spotfit(*args: str, home: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "SPOTFIT_HOME": str(home),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, "-m", "spotfit", *args], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=60)


def test_cli_validate_bad_spec_exits_2_with_one_line(tmp_path):
    path = _write(tmp_path, "name: digits\nscript: train.py\nresourcs: {count: 1}\n")
    result = _spotfit("validate", str(path), home=tmp_path / "home")
    assert result.returncode == 2, result.stderr
    # Whitespace-normalized: see test_cli_error_is_one_line for the wrapping of long messages.
    stderr = " ".join(result.stderr.split())
    assert "did you mean `resources`" in stderr
    assert f"error: Unknown field `resourcs` in {path}" in stderr
    assert "hint: Valid fields at the top level" in stderr
    assert "Traceback" not in result.stderr
    assert result.stdout == ""


def test_cli_error_is_one_line(tmp_path):
    folder = tmp_path / ("deep" * 30)  # a long path makes the message wider than any fixed width
    folder.mkdir()
    path = _write(folder, "name: digits\nscript: train.py\nresourcs: {count: 1}\n")
    result = _spotfit("validate", str(path), home=tmp_path / "home")
    first = result.stderr.splitlines()[0]
    assert first.startswith("error: Unknown field `resourcs`")
    assert first.endswith("did you mean `resources`?")


def test_cli_validate_good_spec(tmp_path):
    path = _write(tmp_path, "name: digits\nscript: train.py\n")
    result = _spotfit("validate", str(path), home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    assert "valid" in result.stdout and "digits" in result.stdout


def test_cli_validate_json(tmp_path):
    path = _write(tmp_path, "name: digits\nscript: train.py\nresources: {count: 2}\n")
    result = _spotfit("validate", "--json", str(path), home=tmp_path / "home")
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["valid"] is True
    assert doc["name"] == "digits"
    spec = load_spec(path)
    assert doc["spec_hash"] == spec.spec_hash()
    assert doc["spec"] == spec.model_dump(mode="json")
    assert doc["spec"]["resources"]["count"] == 2


def test_a_jobs_recorded_spec_is_read_through_its_two_accessors_only():
    """`spec.job.spec_of` (typed) and `state.records.raw_spec_of` (as recorded, for many jobs of any version)."""
    import ast

    root = Path(__file__).resolve().parents[2] / "spotfit"
    sweeps = {"sweep/report.py", "sweep/runner.py", "ui/sweepview.py"}  # a sweep's own spec, not a job's
    readers = []
    for path in sorted(root.rglob("*.py")):
        name = path.relative_to(root).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                    and node.slice.value == "spec_json" and isinstance(node.ctx, ast.Load):
                readers.append(name)
    assert sorted(set(readers) - sweeps) == ["spec/job.py", "state/records.py"]


def test_a_recorded_spec_that_no_longer_validates_is_one_clear_error():
    from spotfit.errors import SpecError
    from spotfit.spec.job import spec_of
    from spotfit.state.records import raw_spec_of

    job = {"id": "old-1", "spec_json": json.dumps({"name": "old", "script": "t.py", "gone_field": 1})}
    with pytest.raises(SpecError) as info:
        spec_of(job)
    assert info.value.message.startswith("The recorded spec of job old-1 does not validate with this spotfit: ")
    assert "\n" not in info.value.message and info.value.hint
    assert raw_spec_of(job)["gone_field"] == 1  # what sums many jobs still reads it
    assert spec_of({"id": "new-1", "spec_json": json.dumps({"name": "new", "script": "t.py"})}).name == "new"
