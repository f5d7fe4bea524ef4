"""A stand-in backend for controller tests: its attempts run until the controller signals them.

A signalled attempt (preempted or stopped) then ends with exit 1, as an attempt interrupted in
its imports does. The replay's first-minute bill in `ZONE` at `START` is what such an attempt
has cost at the controller's first look.
"""

from __future__ import annotations

from datetime import datetime

from spotfit.backends.base import AttemptStatus

ZONE, START = "us-west-2a", "2023-02-17T19:16:00"


class Handle(str):
    def to_json(self) -> str:
        return str(self)


class RunsUntilSignalled:
    """Attempts that run until signalled, then exit 1; `max_launches` fails the test past it."""

    name = "stand-in"
    runs_here = False

    def __init__(self, max_launches: int | None = None):
        self.launches = 0
        self.max_launches = max_launches
        self.signalled: set[str] = set()
        self.requests: list = []  # every LaunchRequest, in order

    def launch(self, request) -> Handle:
        self.launches += 1
        self.requests.append(request)
        assert self.max_launches is None or self.launches <= self.max_launches, "launched again after a stop"
        return Handle(f"h{request.attempt}")

    def load_handle(self, text: str) -> Handle:
        return Handle(text)

    def preempt(self, handle, notice_s: float) -> None:
        self.signalled.add(handle)

    def stop(self, handle, grace_s: float = 10.0) -> None:
        self.signalled.add(handle)

    def status(self, handle) -> AttemptStatus:
        return AttemptStatus(running=False, exit_code=1) if handle in self.signalled else AttemptStatus(running=True)


def first_minute_usd() -> float:
    """What the replay bills for the first minute of a spot launch in `ZONE` at `START`."""
    from spotfit.market.replay import MarketReplay
    from spotfit.market.trace import load_trace, resolve_trace

    replay = MarketReplay(load_trace(resolve_trace("aws-v100")), [ZONE], 60.0, datetime.fromisoformat(START))
    return replay.cost_usd("spot", ZONE, replay.origin_s, replay.origin_s)[1]
