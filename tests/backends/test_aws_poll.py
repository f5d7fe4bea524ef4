"""The aws backend's status answers many attempts from one DescribeInstances per region (backends/aws/poll.py)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from spotfit.backends.aws import poll
from tests.support.aws_moto import aws_backend, launch_request


@pytest.fixture
def listing(monkeypatch) -> poll.InstancePoll:
    shared = poll.InstancePoll(max_age_s=3600.0)  # one window for the whole test: no clock in the assertions
    monkeypatch.setattr(poll, "SHARED", shared)
    return shared


def _describes(aws) -> tuple[int, int]:
    """(listings by tag, lookups by instance id) sent to EC2 so far."""
    calls = aws.calls.of("DescribeInstances")
    return sum("Filters" in c for c in calls), sum("InstanceIds" in c for c in calls)


def _attempts(aws, job: str, first: int, n: int) -> list:
    """Attempt 1 of `n` jobs (job-`first`, ...), each launched by a backend of its own."""
    return [aws_backend(aws).launch(replace(launch_request(job), job_id=f"job-{i}"))
            for i in range(first, first + n)]


def test_one_listing_answers_every_attempt_of_every_backend(aws, job, listing):
    handles = _attempts(aws, job, 1, 4)
    before = _describes(aws)
    backends = [aws_backend(aws) for _ in handles]  # one per job, as the controller's drivers have them
    assert all(b.status(h).running for b, h in zip(backends, handles, strict=True))
    listed, by_id = _describes(aws)
    assert (listed - before[0], by_id - before[1]) == (1, 0)  # one call for four attempts, none per attempt
    assert listing.calls == 1


def test_an_instance_launched_after_the_listing_is_asked_for_by_its_id(aws, job, listing):
    first, = _attempts(aws, job, 1, 1)
    backend = aws_backend(aws)
    assert backend.status(first).running
    later, = _attempts(aws, job, 2, 1)
    before = _describes(aws)
    assert backend.status(later).running
    assert _describes(aws) == (before[0], before[1] + 1)


def test_an_attempt_this_process_stopped_is_not_answered_from_the_old_listing(aws, job, listing):
    handle, other = _attempts(aws, job, 1, 2)
    backend = aws_backend(aws)
    assert backend.status(handle).running and backend.status(other).running
    backend.stop(handle, grace_s=0.0)
    assert not backend.status(handle).running  # stale for up to a pass otherwise: the stop forgets the listing
    assert backend.status(other).running


def test_a_worker_missing_from_every_answer_ends_a_multi_worker_attempt(aws, job, listing):
    handle, = _attempts(aws, job, 1, 1)
    ghost = replace(handle, instances=(*handle.instances, "i-0123456789abcdef0"))  # EC2 knows nothing of it
    assert not aws_backend(aws).status(ghost).running
