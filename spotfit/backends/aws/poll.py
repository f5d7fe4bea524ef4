"""One `DescribeInstances` per region per poll, however many attempts a controller watches.

A controller drives many jobs (`controller/pool.py`), and each pass of each job asks its
backend whether the attempt still runs. Asked one attempt at a time, that is one EC2 call per
job per pass: thousands a minute for a team's sweep, against EC2's request limits. Instead the
first question in a poll window lists every spotfit instance of the region at once (by the
`spotfit:managed` tag, paginated) and the answers of the next `max_age_s` seconds come from that
listing. An instance the listing lacks (launched after it, or gone from EC2's own listing) is
asked for by its id, as before. The listing is shared by every backend of the process that
talks to the same endpoint, region and account.

Example (a listing answers every attempt it holds without another call):

>>> poll = InstancePoll(max_age_s=60.0)
>>> calls = []
>>> def listing(ec2): calls.append("list"); return {"i-1": "running", "i-2": "terminated"}
>>> poll.states(("endpoint", "eu-west-1", "key"), None, ["i-1"], listing, by_id=None)
{'i-1': 'running'}
>>> poll.states(("endpoint", "eu-west-1", "key"), None, ["i-2"], listing, by_id=None), calls
({'i-2': 'terminated'}, ['list'])
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

MAX_AGE_S = 1.0  # a listing answers for this long: about one controller pass

Key = tuple[Any, ...]  # (endpoint URL, region, access key id): who sees which instances
Listing = Callable[[Any], dict[str, str]]


class InstancePoll:
    """The latest listing of each (endpoint, region, account), and when it was taken."""

    def __init__(self, max_age_s: float = MAX_AGE_S, clock: Callable[[], float] = time.monotonic):
        self.max_age_s = max_age_s
        self.clock = clock
        self._lock = threading.Lock()
        self._listings: dict[Key, tuple[float, dict[str, str]]] = {}
        self.calls = 0  # listings taken (the scale bench reports EC2 calls per minute)

    def states(self, key: Key, ec2: Any, ids: list[str], listing: Listing,
               by_id: Callable[[Any, list[str]], dict[str, str]] | None) -> dict[str, str]:
        """{instance id: state} for `ids`: from a listing at most `max_age_s` old, else a new one; the ids it
        lacks by `by_id` (None: they are left out, as EC2 leaves out an instance it no longer knows)."""
        with self._lock:  # one caller lists; the others of the same window wait for its answer
            taken, seen = self._listings.get(key, (float("-inf"), {}))
            if self.clock() - taken > self.max_age_s:
                seen = listing(ec2)
                self.calls += 1
                self._listings[key] = (self.clock(), seen)
        found = {i: seen[i] for i in ids if i in seen}
        missing = [i for i in ids if i not in seen]
        if missing and by_id is not None:
            found.update(by_id(ec2, missing))
        return found

    def forget(self, key: Key) -> None:
        """Drop the listing of `key` (this process has just changed its instances): the next question lists anew."""
        with self._lock:
            self._listings.pop(key, None)


SHARED = InstancePoll()
