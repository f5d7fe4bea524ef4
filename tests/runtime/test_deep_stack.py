"""`on_a_deep_stack`: calls looping at a depth that straddles two of CPython 3.11's 16 KiB frame-stack chunks
map and unmap a chunk on every call (a fresh page fault each time) unless they run on the deep stack."""

from __future__ import annotations

import resource

import pytest

from spotfit.runtime.deep_stack import on_a_deep_stack

CALLS = 2000


def _leaf() -> int:
    return 1


# The leaf's frame is larger than a `_faults_of_calls_at` frame (about 10 slots), so whatever depth the test starts
# at, one of the depths below leaves less room in its chunk than the leaf needs: its every call crosses.
_leaf.__code__ = _leaf.__code__.replace(co_stacksize=64)


def _faults_of_calls_at(depth: int) -> int:
    """The minor page faults of this thread while it makes CALLS calls, `depth` frames below here."""
    if depth:
        return _faults_of_calls_at(depth - 1)
    before = resource.getrusage(resource.RUSAGE_THREAD).ru_minflt
    for _ in range(CALLS):
        _leaf()
    return resource.getrusage(resource.RUSAGE_THREAD).ru_minflt - before


def _worst_depth() -> int:
    # A chunk holds 2,048 slots: 400 depths of about 10 slots each cross a boundary.
    return max(_faults_of_calls_at(depth) for depth in range(400))


def test_calls_at_a_chunk_boundary_fault_on_the_ordinary_stack_and_not_on_the_deep_one():
    assert _worst_depth() >= CALLS  # the control: at the boundary every call maps a fresh chunk
    assert on_a_deep_stack(_worst_depth) < CALLS // 20


def test_the_function_s_value_and_its_exception_pass_through():
    assert on_a_deep_stack(lambda: "value") == "value"
    with pytest.raises(KeyError, match="raised inside"):
        on_a_deep_stack(lambda: {}["raised inside"])
