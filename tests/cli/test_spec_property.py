"""Every spec `validate` accepts, `plan` and `run --dry-run` accept too, in bounded time (issue 47).

Hypothesis (derandomized: CI sees the same examples every run) builds specs from the fields whose
values once broke `plan` after `validate` passed them: market ticks and overheads, hours, budgets,
counts, zones, starts, stores and environment names, each drawn from valid values, edge values and
hostile ones (NaN, infinities, zero, negatives, huge numbers, wrong types). For each spec, either
`validate` refuses it with one line and exit 2, or `plan --json` and `run --dry-run --json` end
with exit 0 or with one line and exit 2: never a traceback, never exit 1. A spec that makes either
spin is stopped by an alarm (`HANG_S`, far above the bounds of spotfit/market/simulator.py) and
fails the test; the alarm is a hang guard, not a speed assertion.
"""

from __future__ import annotations

import json
import signal
from contextlib import contextmanager

import yaml
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from spotfit.cli import app
from tests.cli.conftest import check_refusal

EXAMPLES = 40
HANG_S = 120

_edge = st.sampled_from([0, -1, 1e-9, 1e-6, 0.5, 1, 59, 60, 195, 3600, 1e6, 1e12, float("nan"), float("inf")])
HOSTILE = st.one_of(_edge, st.integers(-5, 10**7), st.sampled_from(["3", "x", None, [1], {"a": 1}, True]))


def _mostly(valid: st.SearchStrategy) -> st.SearchStrategy:
    """`valid` three times in four, a hostile value otherwise: most specs get past `validate` to `plan`."""
    return st.one_of(valid, valid, valid, HOSTILE)


NUMBER = _mostly(st.floats(min_value=0.0, max_value=1e4))
HOURS = _mostly(st.floats(min_value=0.01, max_value=200))
TEXT = st.one_of(st.text(max_size=12), st.sampled_from(["", "x", "a=b", "../..", "/etc/passwd", "\u202e"]))

MARKET = st.fixed_dictionaries({}, optional={
    "trace": st.sampled_from(["aws-v100", None, "nope", "/etc/passwd"]),
    "zones": st.one_of(st.lists(st.sampled_from(["us-west-2a", "us-west-2b", "us-east-1a", "zz"]), max_size=3),
                       TEXT),
    "start": st.sampled_from(["2023-02-17T19:16:00", "2023-02-26T22:15:16", "1999-01-01T00:00:00", "x", 5]),
    "time_scale": _mostly(st.floats(min_value=0.1, max_value=1e5)),
    "gap_s": _mostly(st.floats(min_value=1, max_value=3600)),
    "overhead_h": _mostly(st.floats(min_value=0.0, max_value=6)),
    "max_overpay": _mostly(st.floats(min_value=0.0, max_value=2)),
    "policy": st.sampled_from(["default", "mdp", "rollout", "spotfit", "on_demand", "nope"]),
})
RESOURCES = st.fixed_dictionaries({}, optional={
    "accelerator": st.sampled_from(["V100", "A100", "T4", "H100", "X"]),
    "count": _mostly(st.sampled_from([1, 2, 4, 8])),
    "workers": _mostly(st.integers(1, 4)),
    "spot": st.sampled_from([True, False, "yes", None]),
})
SPEC = st.fixed_dictionaries({"name": st.just("prop"), "script": st.just("train.py")}, optional={
    "work_h": HOURS,
    "deadline_h": HOURS,
    "budget_usd": NUMBER,
    "max_failures": _mostly(st.integers(0, 5)),
    "market": MARKET,
    "resources": RESOURCES,
    "checkpoint": st.fixed_dictionaries({}, optional={
        "store": st.sampled_from(["memory://p", "oss://b/x", "s3://b/x", "ftp://h/x", "file:///tmp/x", "x"]),
        "keep": _mostly(st.integers(1, 5)),
        "interval": st.sampled_from(["auto", {"steps": 0}, {"steps": 10}, {"seconds": -1}, 3]),
    }),
    "env": st.one_of(st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,8}", fullmatch=True), st.text(max_size=8),
                                     max_size=2),
                     st.dictionaries(TEXT, st.one_of(TEXT, NUMBER), max_size=2)),
    "args": st.lists(TEXT, max_size=3),
})


@contextmanager
def _hang_guard(what: str):
    def spun(signum, frame):
        raise AssertionError(f"{what} ran past {HANG_S} s")

    previous = signal.signal(signal.SIGALRM, spun)
    signal.alarm(HANG_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _invoke(runner: CliRunner, *args: str):
    with _hang_guard(f"spotfit {' '.join(args)}"):
        return runner.invoke(app, list(args))


@settings(max_examples=EXAMPLES, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=SPEC)
@example(doc={"name": "prop", "script": "train.py", "market": {"gap_s": 1e-6}})  # ZeroDivisionError in `plan`
@example(doc={"name": "prop", "script": "train.py", "work_h": 3, "deadline_h": 4, "market": {"overhead_h": 1000}})
def test_what_validate_accepts_plan_and_a_dry_run_accept_or_refuse_in_one_line(tmp_path, spotfit_home, doc):
    (tmp_path / "train.py").write_text("import keras\nmodel.fit()\n")
    path = tmp_path / "spotfit.yaml"
    path.write_text(yaml.safe_dump(doc, allow_unicode=True))
    runner = CliRunner()
    checked = _invoke(runner, "validate", str(path))
    if checked.exit_code != 0:
        check_refusal(checked.exit_code, checked.stdout, checked.stderr, f"validate {doc!r}")
        return
    for args in (("plan", str(path), "--json"), ("run", str(path), "--dry-run", "--json")):
        out = _invoke(runner, *args)
        if out.exit_code == 0:
            json.loads(out.stdout)
        else:
            check_refusal(out.exit_code, out.stdout, out.stderr, f"{args[0]} of a validated spec {doc!r}")
