"""Run a function on a roomy stretch of CPython 3.11's frame stack, so deep call chains stop paying for
each call that crosses from one 16 KiB stack chunk into the next.

CPython 3.11 keeps Python frames in chunks of 16 KiB, mapped with `mmap` when a call needs a new chunk and
unmapped as soon as the frame at the chunk's start returns. Code that loops at a call depth that happens to
straddle two chunks maps and unmaps a chunk on every call (CPython issue gh-142183, "Calls across stack chunks
perform badly", fixed with a cached chunk in 3.13 and 3.14, not in 3.11). Importing TensorFlow and tracing a
Keras model do this: in a spotfit attempt of the small benchmark model, 66,209 chunk maps before `fit` and
11,625 in its first epoch, against 11,799 and 4,023 in `python train.py` of the same file, whose frames sit
at other depths (docs/benchmarks.md, "Where the runtime's extra CPU goes").

`on_a_deep_stack(fn)` calls `fn` from a frame that declares a large evaluation stack (it never uses it), so
the interpreter gives that frame a chunk of its own, 512 KiB, and every frame `fn` calls lands in the half it
leaves free: about 33,000 slots, some 1,500 frames of the usual size, before a chunk boundary is met again.
The free half is address space, not memory: a page is touched only when a frame reaches it. Nothing else
changes (the frames are the interpreter's own, numerics and tracebacks are unaffected), and on a Python that
lays out frames another way the frame is merely larger than it needs to be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")

# A frame needs its slots plus 1,000 spare (CPython's MINIMUM_OVERHEAD) in one chunk; a chunk is 16 KiB doubled
# until that fits. 31,800 slots (254 KiB) + 1,000 asks for just over 256 KiB, so the chunk is 512 KiB.
STACK_SLOTS = 31_800


def _call(fn: Callable[[], T]) -> T:
    return fn()


_call.__code__ = _call.__code__.replace(co_stacksize=STACK_SLOTS)


def on_a_deep_stack(fn: Callable[[], T]) -> T:
    """`fn()`, called from a frame at the start of a 512 KiB stack chunk (see the module's docstring)."""
    return _call(fn)
