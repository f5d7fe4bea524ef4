"""What the dashboard plans: a spec's content (posted, capped) or a job it already knows. Never a path.

The plan page and `/api/plan` take the YAML itself in the request's body, at most
`MAX_SPEC_BYTES`, read with the CLI's bounded loader, or the name of a job in the state DB (its
recorded spec). A trace, whether named in posted content, in a job's recorded spec or as `trace=`,
must be a bundled one: the dashboard opens no file a request names, whoever sends it.

A plan runs in a worker thread (`bounded`), within `PLAN_LIMIT_S` (`$SPOTFIT_UI_PLAN_LIMIT_S`), and
stops when its client leaves: the simulator's tick loops check between ticks (market/stopping.py)
and give up with `Stopped`, answered 503. The CLI's `spotfit plan` has no such limit (the spec's
bounds keep it finite); anyone holding the token cannot tie the dashboard's host up.

Example:

>>> plan_content(b"name: d\\nscript: t.py\\nresources: {accelerator: V100}\\n")["accelerator"]
'V100'
>>> plan_content(b"name: d\\nscript: t.py\\nmarket: {trace: /etc/shadow}\\n")
Traceback (most recent call last):
...
spotfit.errors.UsageError: Invalid `market.trace` in the posted spec: received '/etc/shadow', expected a bundled \
trace name (aws-v100, aws-v100-aug-16node, aws-v100-aug-4node): the dashboard opens no file a request names.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import parse_qs

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request

from spotfit.core import crashpoints
from spotfit.core.arguments import env_number
from spotfit.errors import SpecError, UsageError
from spotfit.market import stopping
from spotfit.market.trace import BUNDLED
from spotfit.sdk.market import plan_spec
from spotfit.spec.file import parse_spec_text
from spotfit.spec.job import parse_spec, spec_of
from spotfit.state.records import JobRecord

MAX_SPEC_BYTES = 256 * 1024  # a job spec is a few kilobytes
PLAN_LIMIT_S = 60.0  # a plan of the largest spec validate accepts takes seconds; this is a guard, not a target
LIMIT_ENV = "SPOTFIT_UI_PLAN_LIMIT_S"
POLL_S = 0.25  # how often a running plan's client is asked whether it is still there
SOURCE = "the posted spec"
TRACES = tuple(sorted(BUNDLED))


class TooLarge(UsageError):
    """A request's body is over its cap: answered 413."""


async def read_body(request: Request, cap: int) -> bytes:
    """The request's body, refused (`TooLarge`) as soon as it passes `cap` bytes, whatever it declared."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > cap:
        raise _too_large(int(declared), cap)
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise _too_large(len(body), cap)
    return bytes(body)


async def read_form(request: Request) -> tuple[str, str | None]:
    """The plan form's `spec` (the YAML, at most `MAX_SPEC_BYTES` of it) and `trace` fields."""
    form = parse_qs((await read_body(request, 3 * MAX_SPEC_BYTES + 4096)).decode("latin-1"))  # %-escaped: 3 bytes each
    content = form.get("spec", [""])[0]
    if len(content.encode()) > MAX_SPEC_BYTES:
        raise _too_large(len(content.encode()), MAX_SPEC_BYTES)
    return content, form.get("trace", [None])[0]


def _too_large(size: int, cap: int) -> TooLarge:
    return TooLarge(f"The posted spec is too large: received {size:,} bytes or more, expected at most {cap:,}.",
                    hint="Post the job's YAML (a few kilobytes), not a data, model or log file.")


def bundled_trace(field: str, name: str | None, where: str = "") -> str | None:
    """`name` when it is a bundled trace (or None); any other name, a path above all, is refused."""
    if name is None or name in BUNDLED:
        return name
    raise UsageError(f"Invalid `{field}`{where}: received {name!r}, expected a bundled trace name "
                     f"({', '.join(TRACES)}): the dashboard opens no file a request names.",
                     hint="Name a bundled trace, or run `spotfit plan SPEC --trace FILE` in a shell for a trace file.")


def plan_content(content: bytes, trace: str | None = None) -> dict:
    """The plan of the spec whose YAML is `content` (`spotfit plan`'s document)."""
    try:
        text = content.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(f"The posted spec is not UTF-8 text: byte 0x{content[exc.start]:02x} at offset {exc.start}.",
                        hint="Post the spec's YAML as UTF-8 text.") from None
    if "\x00" in text:
        raise SpecError(f"The posted spec has a NUL byte at offset {text.index(chr(0))}: expected UTF-8 text.",
                        hint="Post the spec's YAML as UTF-8 text.")
    spec = parse_spec(parse_spec_text(text, SOURCE), source=SOURCE)
    bundled_trace("market.trace", spec.market.trace, f" in {SOURCE}")
    return plan_spec(spec, bundled_trace("trace", trace))


def plan_job(job: JobRecord, trace: str | None = None) -> dict:
    """The plan of the spec a job recorded. Its trace too must be bundled: on a team's shared state DB another
    user may have recorded the job, and the dashboard opens no file on anyone's say."""
    try:
        spec = spec_of(job)
    except SpecError:
        raise UsageError(f"Job {job['id']} recorded a spec this spotfit cannot read.",
                         hint="Run `spotfit plan SPEC` with the job's spec file in a shell.") from None
    bundled_trace("market.trace", spec.market.trace, f" of job {job['id']}")
    return plan_spec(spec, bundled_trace("trace", trace))


def plan_limit_s() -> float:
    """The dashboard's time limit for one plan: `$SPOTFIT_UI_PLAN_LIMIT_S`, else `PLAN_LIMIT_S`."""
    return env_number(LIMIT_ENV, PLAN_LIMIT_S, low_open=False, hint=f"Unset it or set e.g. {LIMIT_ENV}=60.")


async def bounded(request: Request, plan: Callable[..., dict], *args: Any) -> dict:
    """`plan(*args)` in a worker thread, stopped (`stopping.Stopped`) at the time limit or when the client leaves."""
    limit_s, gone = plan_limit_s(), threading.Event()
    deadline = time.monotonic() + limit_s

    def stop() -> str | None:
        if gone.is_set():
            return "The plan's client left before it was ready."
        if time.monotonic() >= deadline:
            return f"The plan took longer than the dashboard's limit of {limit_s:g} s."
        return None

    def work() -> dict:
        crashpoints.hold("plan_running")
        with stopping.stopping_when(stop, hint="Run `spotfit plan SPEC` in a shell, which has no time limit, or "
                                                f"raise {LIMIT_ENV} where the dashboard runs."):
            return plan(*args)

    task = asyncio.ensure_future(run_in_threadpool(work))
    while not task.done():
        await asyncio.wait({task}, timeout=POLL_S)
        if not task.done() and not gone.is_set() and await request.is_disconnected():
            gone.set()
            sys.stderr.write(f"spotfit ui: the client of a plan ({request.url.path}) left; stopping it\n")
    try:
        return task.result()
    except stopping.Stopped as exc:
        sys.stderr.write(f"spotfit ui: plan stopped: {exc.message}\n")
        raise
