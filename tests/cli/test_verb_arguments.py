"""Every verb's arguments, fuzzed: bad values end in one clear line and exit 2, and change nothing.

Property-based (hypothesis, derandomized): NaN and infinity, huge and negative numbers, empty
and blank strings, control characters and unicode names, for each verb of `spotfit --help`
(job references, numeric flags, names and URLs). Values that are valid for a flag are skipped
by an oracle written from the flag's documented range, so each example is bad input; the
`refused` fixture checks exit 2, one `error:` line, no traceback and an unchanged state DB.
"""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

FUZZ = settings(max_examples=20, derandomize=True, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture])

JOB_ID = "seeded-20260101-000000-abcd"  # the job of the `seeded_home` fixture
JOB_NAME = "seeded"

SPECIAL = ["", " ", "\t", "nan", "NaN", "-nan", "inf", "-inf", "+Infinity", "1e400", "-1e400", "1e308", "0", "-0",
           "-1", "0.0", "1e-400", "ü", "名前", "٣", "1_000", "0x10", "1e", "--", "9" * 400]
NUMBERS = st.one_of(
    st.sampled_from(SPECIAL),
    st.integers(min_value=-(10**40), max_value=10**40).map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.text(max_size=12),
)
ODD_TEXT = ["", " ", "\t\n", "\x00", "a\x00b", "\x1b[31m", "[/x]", ":smile:", "名前", "ü" * 300]
TEXTS = st.one_of(st.sampled_from(ODD_TEXT), st.text(max_size=40))


def _numbers(text: str) -> list[float]:
    """Every number a lenient parser could read from `text` (Python's int and float accept more than typer)."""
    out = []
    for parse in (int, float):
        try:
            out.append(parse(text))
        except (ValueError, OverflowError):
            pass
    return out


def in_range(text: str, integer: bool, low: float, high: float, low_open: bool) -> bool:
    """Whether some reading of `text` is a valid value for the flag (such examples are skipped)."""
    for value in _numbers(text):
        if integer and not (math.isfinite(value) and float(value).is_integer()):
            continue
        if math.isfinite(value) and (value > low if low_open else value >= low) and value <= high:
            return True
    return False


RECORD = ["market", "record", "--region", "us-west-2", "--instance-type", "p3.2xlarge"]
# verb and arguments before the flag, flag, integer?, low, high, low bound excluded? (docs: `spotfit VERB --help`)
NUMERIC_FLAGS = [
    (["list"], "--limit", True, 1, 1_000_000, False),
    (["logs", JOB_ID], "--attempt", True, 1, 1_000_000, False),
    (["simulate"], "--work-h", False, 0, 87_600, True),
    (["simulate"], "--deadline-h", False, 0, 87_600, True),
    (["simulate"], "--overhead-h", False, 0, 87_600, False),
    (["simulate"], "--starts", True, 1, 1_000, False),
    (["simulate"], "--gap-s", True, 60, 86_400, False),  # a 1 s tick made the default policy spin for minutes
    (["simulate"], "--max-overpay", False, 0, 10, False),
    (["catalog"], "--count", True, 1, 16, False),
    (["tensorboard", JOB_ID], "--port", True, 1, 65_535, False),
    (RECORD, "--hours", False, 0.1, 2160, False),
    (RECORD, "--gap-s", True, 60, 86_400, False),
    (["ui"], "--port", True, 0, 65_535, False),
]


@FUZZ
@given(flag=st.sampled_from(NUMERIC_FLAGS), text=NUMBERS)
def test_numeric_flags_refuse_bad_numbers(seeded_home, refused, flag, text):
    before, name, integer, low, high, low_open = flag
    assume(not in_range(text, integer, low, high, low_open))
    refused(*before, f"{name}={text}")


def not_a_ref_of_the_seeded_job(ref: str) -> bool:
    return not ref.strip() or not (JOB_ID.startswith(ref) or ref == JOB_NAME)


@FUZZ
@given(verb=st.sampled_from(["status", "logs", "cancel", "resume", "cost", "tensorboard"]),
       ref=TEXTS.filter(not_a_ref_of_the_seeded_job))
def test_job_references(seeded_home, refused, verb, ref):
    refused(verb, "--", ref)  # `--`: a reference such as "-x" is an argument, not a flag


def test_no_job_yet(refused):
    refused("cost")
    refused("tensorboard")


def test_an_empty_reference_does_not_match_every_job(seeded_home, refused):
    # An empty id prefix once matched the seeded job: `spotfit cancel ""` cancelled it.
    assert "Invalid `JOB`" in refused("cancel", "")


BUNDLED_TRACE = ["aws-v100", "aws_p3.2xlarge_v100_avail_2023-02-15_9zones.csv.gz"]
POLICIES = ["all", "default", "greedy", "greedy_first", "mdp", "on_demand", "optimum", "rollout", "spotfit",
            "uniform_progress", "uniform_progress_first"]
ACCELERATORS = ["a10", "a100", "a100-80gb", "a10g", "h100", "k80", "l4", "l40s", "p4", "t4", "v100", "v100-32gb"]
REGION_RE = r"[a-z]{2}(-[a-z]+)+-\d{1,2}"
URL_RE = r"[a-z0-9]+://\S*"


@pytest.fixture
def small_trace(tmp_path):
    """A 40-tick trace of one zone, `z1` (the bundled one takes longer to load)."""
    rows = ["tick,timestamp,zone,available,spot_price_usd_per_h,on_demand_usd_per_h"]
    rows += [f"{t},2023-01-01 00:{t:02d}:00,z1,1,1.0,3.0" for t in range(40)]
    path = tmp_path / "small.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


@FUZZ
@given(case=st.sampled_from(["trace", "policy", "zones", "accelerator", "region", "cloud"]), text=TEXTS)
def test_market_names(seeded_home, refused, small_trace, case, text):
    if case == "trace":
        assume(text not in BUNDLED_TRACE)
        refused("simulate", f"--trace={text}")
    elif case == "policy":
        assume(text not in POLICIES)
        refused("simulate", f"--trace={small_trace}", f"--policy={text}")
    elif case == "zones":
        assume(any(zone.strip() != "z1" for zone in text.split(",")))  # a comma separates zones
        refused("simulate", f"--trace={small_trace}", "--work-h=0.1", "--deadline-h=0.2", f"--zones={text}")
    elif case == "accelerator":
        assume(text.lower() not in ACCELERATORS)
        refused("catalog", f"--accelerator={text}")
    elif case == "region":
        refused("catalog", f"--region={text}")  # the catalogs' regions are lower-case ASCII, not 40 random chars
    else:
        assume(text.lower() not in ("aws", "gcp", "azure"))
        refused("catalog", f"--cloud={text}")


@FUZZ
@given(region=TEXTS.filter(lambda s: not re.fullmatch(REGION_RE, s)),
       job=st.sampled_from(["", " ", "\t", "\x00", "a\nb", "\x7f"]))
def test_gc_refuses_bad_regions_and_blank_jobs_before_any_cloud_call(seeded_home, refused, region, job):
    refused("gc", f"--region={region}", "--dry-run")
    refused("gc", "--region=us-east-1", f"--job={job}", "--dry-run")  # a blank --job once meant every job


def test_cloud_verbs_refuse_a_backend_without_the_ability(seeded_home, refused):
    """`gc --backend` and `market record --cloud` name the backends that can (declared abilities), not a list."""
    line = refused("gc", "--backend=local", "--dry-run")
    assert line.startswith("error: Invalid --backend: received 'local', expected aws or gcp (the backends that "
                           "leave resources behind in a cloud)."), line
    line = refused("market", "record", "--cloud=kubernetes", "--region=us-east-1", "--instance-type=p3.2xlarge")
    assert line.startswith("error: Invalid --cloud: received 'kubernetes', expected aws or gcp (the backends "
                           "that record a live spot market)."), line


@FUZZ
@given(flag=st.sampled_from(["--store", "--registry"]), url=TEXTS.filter(lambda s: not re.fullmatch(URL_RE, s)))
def test_doctor_refuses_what_is_not_a_url_before_importing_tensorflow(seeded_home, refused, flag, url):
    refused("doctor", f"{flag}={url}")


def preemptions_are_valid(text: str) -> bool:
    """The documented form: STEP[:NOTICE_S],... with ASCII digits, STEP >= 1, at least one."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    return bool(parts) and all(
        (m := re.fullmatch(r"(\d+)(?::(\d+(?:\.\d*)?|\.\d+))?", p, re.ASCII)) and 1 <= int(m[1]) <= 2**53
        for p in parts)


@pytest.fixture
def good_spec(tmp_path):
    (tmp_path / "train.py").write_text("print('never run')\n")
    path = tmp_path / "spotfit.yaml"
    path.write_text("name: fuzz\nscript: train.py\n")
    return path


@FUZZ
@given(text=st.one_of(NUMBERS, TEXTS, st.lists(NUMBERS, min_size=1, max_size=4).map(",".join),
                      st.tuples(NUMBERS, NUMBERS).map(":".join)))
def test_run_refuses_bad_preemptions_before_recording_a_job(seeded_home, refused, good_spec, text):
    assume(not preemptions_are_valid(text))
    refused("run", str(good_spec), f"--preempt-at={text}")


@FUZZ
@given(backend=TEXTS.filter(lambda s: s not in ("local", "aws")), dry_run=st.booleans())
def test_run_refuses_unknown_backends(seeded_home, refused, good_spec, backend, dry_run):
    refused("run", str(good_spec), f"--backend={backend}", *(["--dry-run"] if dry_run else []))


def test_dry_run_refuses_the_local_backend(seeded_home, refused, good_spec):
    assert "expected aws" in refused("run", str(good_spec), "--dry-run")


@pytest.mark.parametrize("args", [
    ["frobnicate"],
    ["status"],
    ["list", "--nope"],
    ["list", "--limit"],
    ["validate", "a.yaml", "b.yaml"],
    ["simulate", "--work-h=abc"],
    ["--debug", "nope"],
])
def test_usage_errors(seeded_home, refused, args):
    refused(*args)


@FUZZ
@given(verb=st.sampled_from(["validate", "plan", "run"]), path=TEXTS)
def test_spec_paths_that_name_no_file(seeded_home, refused, verb, path):
    refused(verb, "--", path)
