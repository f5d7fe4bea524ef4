"""The spec loader on hostile files: each is refused with one clear line, exit 2, nothing recorded.

Property-based (hypothesis, derandomized so CI sees the same examples every run): random
bytes, wrong encodings, files past the size cap, alias bombs and deep nesting, NaN and
infinity, huge numbers, empty strings and unicode names. Each file goes through `load_spec`
and through `spotfit validate` (in process); a few also through `plan` and `run`.
"""

from __future__ import annotations

import re
import tracemalloc

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spotfit.errors import SpecError
from spotfit.spec.file import MAX_SPEC_BYTES, MAX_SPEC_DEPTH, MAX_SPEC_VALUES
from spotfit.spec.job import load_spec

FUZZ = settings(max_examples=25, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

VALID = "name: fuzz\nscript: train.py\n"
NAME_RE = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"

# Numeric fields of the spec, with what makes each valid (bases add the sections they need).
NUMBER_FIELDS = ["resources.count", "resources.workers", "market.time_scale", "market.gap_s", "market.overhead_h",
                 "market.max_overpay", "checkpoint.keep", "training.seed", "training.histogram_freq", "deadline_h",
                 "work_h", "budget_usd", "max_failures", "data.workers", "data.cache_limit_gib", "aws.worker_port"]
TEXT_FIELDS = ["name", "script", "resources.accelerator", "market.trace", "market.policy", "checkpoint.store",
               "data.source", "data.cache_dir", "export.registry", "aws.region", "aws.instance_type", "aws.ami",
               "backend"]


@pytest.fixture
def spec_file(tmp_path, seeded_home):
    """Write a spec (text or bytes) beside a `train.py`; returns its path."""
    (tmp_path / "train.py").write_text("print('never run')\n")

    def write(content: str | bytes, name: str = "spotfit.yaml"):
        path = tmp_path / name
        path.write_bytes(content.encode() if isinstance(content, str) else content)
        return path

    return write


def refused_by_loader(path) -> str:
    """`load_spec`'s one-line SpecError for `path` (fails the test if the spec loads)."""
    with pytest.raises(SpecError) as info:
        load_spec(path)
    message = info.value.message
    assert "\n" not in message and "\n" not in (info.value.hint or ""), message
    return message


def with_field(field: str, literal: str) -> str:
    """A valid spec with `field` (dotted) set to the raw YAML `literal`."""
    doc: dict = yaml.safe_load(VALID)
    if field.startswith("data."):
        doc["data"] = {"source": "file:///tmp/data"}
    *parents, key = field.split(".")
    node = doc
    for part in parents:
        node = node.setdefault(part, {})
    node[key] = "@@VALUE@@"
    return yaml.safe_dump(doc, allow_unicode=True).replace("'@@VALUE@@'", literal).replace("@@VALUE@@", literal)


def test_the_valid_base_spec_loads(spec_file):
    # The fuzzed specs below differ from this one in the fuzzed part only.
    assert load_spec(spec_file(VALID)).name == "fuzz"
    for field in NUMBER_FIELDS:
        load_spec(spec_file(with_field(field, {"aws.worker_port": "2222", "market.gap_s": "60"}.get(field, "2"))))
    for field in TEXT_FIELDS:
        value = {"checkpoint.store": "file:///tmp/s", "data.source": "file:///tmp/d", "export.registry": "file:///r",
                 "backend": "aws", "script": "train.py", "name": "n"}.get(field, "x")
        load_spec(spec_file(with_field(field, value)))


@FUZZ
@given(content=st.binary(max_size=4096))
def test_random_bytes(spec_file, refused, content):
    path = spec_file(content)
    refused_by_loader(path)
    refused("validate", str(path))


@FUZZ
@given(encoding=st.sampled_from(["utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-be", "latin-1", "cp1252"]),
       letters=st.lists(st.characters(min_codepoint=0xC0, max_codepoint=0xFF), min_size=1, max_size=20))
def test_wrong_encodings_are_named(spec_file, refused, encoding, letters):
    # Each non-ASCII letter is followed by a space, so that no 8-bit encoding is valid UTF-8 by chance.
    text = VALID + "# " + " ".join(letters) + "\n"
    path = spec_file(text.encode(encoding))
    assert "UTF-8" in refused_by_loader(path)
    assert "UTF-8" in refused("validate", str(path))


def test_a_100_mib_file_is_refused_by_its_size_without_being_read(spec_file, refused):
    path = spec_file(VALID)
    with open(path, "r+b") as f:
        f.truncate(100 * 2**20)  # sparse: the test writes nothing, the loader must read nothing
    tracemalloc.start()
    try:
        message = refused_by_loader(path)
        _, peak_bytes = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "104,857,600 bytes" in message and "1 MiB" in message, message
    assert peak_bytes < MAX_SPEC_BYTES, f"loading held {peak_bytes:,} bytes at once"
    assert "104,857,600 bytes" in refused("validate", str(path))
    assert "104,857,600 bytes" in refused("plan", str(path))


def test_the_size_cap_is_exact(spec_file, refused):
    padding = MAX_SPEC_BYTES - len(VALID) - 2
    assert load_spec(spec_file(VALID + "#" + "x" * padding + "\n")).name == "fuzz"  # exactly the cap
    assert "1,048,577 bytes" in refused("validate", str(spec_file(VALID + "#" + "x" * (padding + 1) + "\n")))


def alias_bomb(fanout: int, levels: int) -> str:
    """`levels` anchors, each a list of `fanout` aliases of the one before ("billion laughs")."""
    lines = [f"l0: &l0 [{', '.join(['lol'] * fanout)}]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * fanout)}]" for i in range(1, levels)]
    return VALID + "\n".join(lines) + f"\nargs: *l{levels - 1}\n"


@FUZZ
@given(fanout=st.integers(2, 64), levels=st.integers(2, 40))
def test_alias_bombs_are_refused_by_their_expanded_size(spec_file, refused, fanout, levels):
    path = spec_file(alias_bomb(fanout, levels))
    expanded = sum(fanout**i for i in range(1, levels + 1))
    message = refused_by_loader(path)
    if expanded > MAX_SPEC_VALUES:
        assert f"more than {MAX_SPEC_VALUES:,} values once its aliases are expanded" in message, message
    refused("validate", str(path))


@settings(FUZZ, max_examples=10)  # each example scans up to 10 kB of brackets
@given(depth=st.integers(MAX_SPEC_DEPTH + 1, 5_000), kind=st.sampled_from(["[", "{a: "]))
def test_deep_nesting_is_refused(spec_file, refused, depth, kind):
    closing = "]" if kind == "[" else "}"
    path = spec_file(VALID + "args: " + kind * depth + "1" + closing * depth + "\n")
    assert f"deeper than {MAX_SPEC_DEPTH} levels" in refused_by_loader(path)
    refused("validate", str(path))


def test_an_alias_inside_its_own_anchor_is_refused(spec_file, refused):
    path = spec_file(VALID + "args: &loop [a, *loop]\n")
    assert "refers to the mapping or list that contains it" in refused_by_loader(path)
    refused("validate", str(path))


@pytest.mark.parametrize(("text", "key", "lines"), [
    ("name: x\nscript: train.py\nname: y\n", "name", (1, 3)),
    (VALID + "market:\n  trace: aws-v100\n  time_scale: 600\n  trace: null\n", "trace", (4, 6)),
    (VALID + "env: {A: '1', B: '2', A: '3'}\n", "A", (3, 3)),
])
def test_a_key_written_twice_is_refused_with_both_lines(spec_file, refused, text, key, lines):
    # Plain YAML keeps the last value silently: the spec that runs would not be the one its author reads.
    path = spec_file(text)
    message = refused_by_loader(path)
    assert f"names `{key}` twice: at line {lines[0]} and again at line {lines[1]}" in message, message
    assert "twice" in refused("validate", str(path))


@pytest.mark.parametrize("env", ["{'A=B': x}", "{'': y}", "{'1X': y}", "{'A B': y}", "{A: \"a\\0b\"}"])
def test_environment_variables_the_os_refuses_are_refused_at_validate(spec_file, refused, env):
    # Before, such a job was recorded, then failed 4 launches with back-offs (`illegal environment variable name`).
    path = spec_file(VALID + f"env: {env}\n")
    assert "`env`" in refused_by_loader(path)
    refused("validate", str(path))
    refused("run", str(path))


@pytest.mark.parametrize("field", ["checkpoint.store", "data.source", "export.registry"])
@pytest.mark.parametrize("url", ["oss://bucket/x", "ftp://host/x", "http://127.0.0.1/x"])
def test_a_store_spotfit_cannot_open_is_refused_at_validate(spec_file, refused, field, url):
    # Before, `oss://` passed `validate` and was refused only by `run`.
    path = spec_file(with_field(field, url))
    assert f"`{field}`" in refused_by_loader(path) and "not a store spotfit opens" in refused("validate", str(path))


@pytest.mark.parametrize(("market", "expected"), [
    ("{gap_s: 0.000001}", "`market.gap_s`"),  # was a ZeroDivisionError in `plan` and a 500 in the dashboard
    ("{gap_s: 1}", "`market.gap_s`"),  # a 1 s tick: the default policy spun for minutes
    ("{overhead_h: 1000}", "`market.overhead_h`"),  # longer than the deadline: `plan` spun for over a minute
])
def test_market_settings_that_stalled_plan_are_refused_at_validate(spec_file, refused, market, expected):
    path = spec_file(VALID + f"work_h: 3\ndeadline_h: 4\nmarket: {market}\n")
    assert expected in refused_by_loader(path)
    assert expected in refused("validate", str(path))
    assert expected in refused("plan", str(path))


def test_a_plan_that_would_simulate_too_many_ticks_is_refused_in_one_line(spec_file, refused):
    # A 300 h deadline at a 60 s tick, over every zone: the bound names the figures and the way out.
    path = spec_file(VALID + "work_h: 250\ndeadline_h: 300\nmarket: {trace: aws-v100, gap_s: 60}\n")
    assert "too large" in refused("plan", str(path))


def test_a_merge_key_is_not_a_duplicate(spec_file):
    # `<<: *base` then a key of the base: YAML's merge rule says the key written here wins.
    path = spec_file(VALID + "market: {<<: {trace: aws-v100, time_scale: 60}, time_scale: 600}\n")
    assert load_spec(path).market.time_scale == 600


@FUZZ
@given(field=st.sampled_from(NUMBER_FIELDS),
       literal=st.sampled_from([".nan", ".NaN", ".NAN", ".inf", ".Inf", "-.inf", "+.INF", "1.0e+309", "-2.5e+400"]))
def test_nan_and_infinity_are_refused_naming_the_field(spec_file, refused, field, literal):
    path = spec_file(with_field(field, literal))
    assert f"`{field}`" in refused_by_loader(path)
    assert f"`{field}`" in refused("validate", str(path))


@FUZZ
@given(field=st.sampled_from(NUMBER_FIELDS + ["rules[0].window_steps"]),
       value=st.integers(min_value=2**53 + 1, max_value=10**400) | st.integers(max_value=-(2**53) - 1,
                                                                               min_value=-(10**400)))
def test_huge_integers_are_refused_naming_the_field(spec_file, refused, field, value):
    if field.startswith("rules"):
        text = VALID + f"rules: [{{rule: loss_plateau, window_steps: {value}}}]\n"
    else:
        text = with_field(field, str(value))
    path = spec_file(text)
    assert f"`{field}`" in refused_by_loader(path)
    refused("validate", str(path))


@FUZZ
@given(field=st.sampled_from(["deadline_h", "work_h", "market.overhead_h", "market.time_scale", "market.gap_s"]),
       value=st.floats(min_value=1e6, max_value=1e308, exclude_min=True))
def test_huge_hours_and_scales_are_refused(spec_file, refused, field, value):
    path = spec_file(with_field(field, repr(value)))
    assert "less than or equal to" in refused_by_loader(path)
    refused("validate", str(path))


@FUZZ
@given(field=st.sampled_from(TEXT_FIELDS), value=st.sampled_from(['""', "''", '" "', '"\\t"', '"  \\n "']))
def test_empty_strings_are_refused_naming_the_field(spec_file, refused, field, value):
    path = spec_file(with_field(field, value))
    assert f"`{field}`" in refused_by_loader(path)
    refused("validate", str(path))


@FUZZ
@given(name=st.text(min_size=1, max_size=80).filter(lambda s: not re.fullmatch(NAME_RE, s)))
def test_unicode_and_odd_names_are_refused(spec_file, refused, name):
    path = spec_file(yaml.safe_dump({"name": name, "script": "train.py"}, allow_unicode=True))
    assert "`name`" in refused_by_loader(path)
    refused("validate", str(path))
    refused("run", str(path))
    refused("run", str(path), "--backend", "aws", "--dry-run")


@FUZZ
@given(key=st.text(min_size=1, max_size=30).filter(lambda s: s.strip() and s not in TEXT_FIELDS + NUMBER_FIELDS))
def test_unknown_unicode_keys_are_refused(spec_file, refused, key):
    path = spec_file(yaml.safe_dump({"name": "fuzz", "script": "train.py", key: 1}, allow_unicode=True))
    assert "Unknown field" in refused_by_loader(path)
    refused("validate", str(path))


@FUZZ
@given(accelerator=st.text(alphabet=st.characters(min_codepoint=0x80), min_size=1, max_size=20))
def test_unicode_accelerators_are_refused_by_plan(spec_file, refused, accelerator):
    # No market trace: the catalog is what refuses the name (the bundled trace would only add load time).
    path = spec_file(yaml.safe_dump({"name": "fuzz", "script": "train.py", "market": {"trace": None},
                                     "resources": {"accelerator": accelerator}}, allow_unicode=True))
    assert "No catalog offer" in refused("plan", str(path))


@pytest.mark.parametrize("text, expected", [
    ("", "received an empty document"),
    ("- a\n- b\n", "received list"),
    ("just words\n", "received str"),
    ("42\n", "received int"),
    ("---\nname: a\n---\nname: b\n", "not valid YAML"),
    ("name: [unclosed\n", "not valid YAML"),
    ("name: fuzz\nscript: train.py\n\x07\n", "not valid YAML"),
    ("? [a, b]\n: c\n", "not valid YAML"),
])
def test_documents_that_are_not_a_spec(spec_file, refused, text, expected):
    path = spec_file(text)
    assert expected in refused_by_loader(path)
    refused("validate", str(path))
