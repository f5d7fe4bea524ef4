"""The window of `make demo` (examples/digits/spotfit.yaml), read from the spec itself: the trace
restricted to its zones, the start tick, its work and deadline."""

from __future__ import annotations

from datetime import UTC

from spotfit.market.trace import Trace, load_trace, resolve_trace
from spotfit.spec.job import JobSpec, load_spec
from tests.support.jobs import DIGITS

DEMO_SPEC = DIGITS / "spotfit.yaml"


def demo_spec() -> JobSpec:
    return load_spec(DEMO_SPEC, check_script=False)


def demo_window(spec: JobSpec | None = None) -> tuple[Trace, int]:
    """(the demo's trace over its zones, the tick that contains its `market.start`)."""
    spec = spec or demo_spec()
    assert spec.market.trace and spec.market.start, "the demo spec names a trace and a start"
    trace = load_trace(resolve_trace(spec.market.trace)).select(spec.market.zones or None)
    first, start = (t if t.tzinfo else t.replace(tzinfo=UTC) for t in (trace.start, spec.market.start))
    return trace, int((start - first).total_seconds() // trace.gap_s)
