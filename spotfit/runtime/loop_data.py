"""The steps of a custom loop and their batches: what `spotfit.loop` yields, plain or resumed.

`data` is any iterable of batches, iterated again from the start whenever it runs out (an
epoch), or a function that returns a new one for each pass. A resumed loop passes over the
batches of the steps already done, so that the data is at the same place in the same order.

>>> list(batches([10, 20, 30], steps=5, start=3))
[(3, 10), (4, 20)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any


def batches(data: Iterable | Callable[[], Iterable], steps: int, start: int) -> Iterator[tuple[int, Any]]:
    """Steps `start..steps-1` with their batches, passing over the first `start` batches."""
    def new_pass() -> Iterator:
        return iter(data() if callable(data) else data)

    iterator, step, drawn_in_pass = new_pass(), 0, 0
    while step < steps:
        try:
            batch = next(iterator)
        except StopIteration:
            if drawn_in_pass == 0:
                raise ValueError("spotfit.loop: `data` gave no batches; pass a non-empty iterable, or a "
                                 "function that returns a new generator for each pass") from None
            iterator, drawn_in_pass = new_pass(), 0
            continue
        drawn_in_pass += 1
        if step >= start:
            yield step, batch
        step += 1
