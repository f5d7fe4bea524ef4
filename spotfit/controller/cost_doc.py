"""A job's cost document (`spotfit cost JOB --json`): its ledger with its hindsight; kept once the job has ended.

The ledger (`controller/ledger.py`) is quick; the hindsight (`controller/hindsight.py`) replays the
job's window, solving the optimum and every online policy (about 40 ms a job here, 10 ms for the
optimum alone). An ended job (completed, failed, cancelled) never changes again
(`state/transitions.py`), so its document is computed once and kept in the state DB's `job_costs`:
by the controller when the job ends, or by the first `cost` that reads it. A document is kept
with the version of the code that computed it (`version()`: a digest of the modules that make
it), and one of another version is computed again: a spotfit whose ledger or policies changed
never shows an old figure. `spotfit cost --all` (`spend_entries`) sums what it kept of each ended job (its
spend entry, beside its document) and computes only
those of live jobs and of ended jobs not kept yet (then keeps them), without the policies' replays; the
optimum of a live job's window is solved once and kept too (`optimum_memo`, by the window's digest:
`hindsight.OptimumMemo`), since its work grows only when an attempt's bill enters the ledger.

>>> len(version()), ENDED == {"completed", "failed", "cancelled"}
(16, True)
"""

from __future__ import annotations

import functools
import hashlib
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from spotfit.state.records import AttemptRecord, JobRecord
from spotfit.state.states import JobState

if TYPE_CHECKING:
    from spotfit.controller.hindsight import OptimumMemo
    from spotfit.state.db import StateDB

T = TypeVar("T")

ENDED = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED})
_SPOTFIT = Path(__file__).resolve().parents[1]
# What a document's figures come from: a change to any of these computes kept documents again.
_SOURCES = ("controller/cost_doc.py", "controller/ledger.py", "controller/hindsight.py", "market/simulator.py",
            "market/trace.py", "market/view.py", "market/policies")


@functools.cache
def version() -> str:
    """A digest of the sources a document's figures come from (`_SOURCES`), read once per process."""
    digest = hashlib.sha256()
    for name in _SOURCES:
        path = _SPOTFIT / name
        for source in sorted(path.rglob("*.py")) if path.is_dir() else [path]:
            digest.update(source.relative_to(_SPOTFIT).as_posix().encode() + b"\0" + source.read_bytes())
    return digest.hexdigest()[:16]


def job_cost(job: JobRecord, attempts: list[AttemptRecord], policies: bool = True,
             memo: OptimumMemo | None = None) -> dict[str, Any]:
    """`cost`'s document for a job row and its attempts, as read from the state DB; with `policies=False`,
    without what every online policy would have paid (`totals.policies` None: `cost --all` sums the rest);
    with `memo`, an optimum solved before is not solved again."""
    from spotfit.controller.hindsight import hindsight
    from spotfit.controller.ledger import ledger
    from spotfit.errors import SpecError
    from spotfit.market.policies.registry import ALIASES
    from spotfit.spec.job import JobSpec, spec_of

    doc = ledger(attempts, job["total_steps"])
    totals = doc["totals"]
    origin_s = job["trace_origin_s"] if job["trace_origin_s"] is not None else next(
        (a["trace_start_s"] for a in attempts if a["trace_start_s"] is not None), None)
    try:
        spec: JobSpec | None = spec_of(job)
    except SpecError:  # recorded by a spotfit whose spec differs: the ledger stands without hindsight
        spec = None
    seen = hindsight(spec, origin_s, totals["work_done_s"], totals["spent_usd"], policies=policies, memo=memo)
    totals.update(optimum_usd=seen["optimum_usd"], policies=seen["policies"], regret=seen["regret"])
    policy = ALIASES.get(spec.market.policy, spec.market.policy) if spec else None
    return {"id": job["id"], "name": job["name"], "state": job["state"], "policy": policy, **doc,
            "hindsight": {"window": seen["window"], "note": seen["note"]}}


def cost_of(db: StateDB, job: JobRecord, attempts: list[AttemptRecord]) -> dict[str, Any]:
    """The job's full document (with the policies): the kept one of an ended job, else computed (and
    kept, when the job has ended)."""
    ended = job["state"] in ENDED
    if ended:
        kept = _kept(db, job_id=job["id"]).get(job["id"])
        doc: dict[str, Any] | None = json.loads(kept) if kept is not None else None
        if doc is not None and doc["totals"]["policies"] is not None:
            return doc
    doc = job_cost(job, attempts)
    if ended:
        keep(db, {job["id"]: doc})
    return doc


Found = list[tuple[JobRecord, list[AttemptRecord]]]


def spend_entries(db: StateDB, since: float, found: Found | None = None) -> list[dict[str, Any]]:
    """What `cost --all` sums (`spend.entry_of`) of each job created at or after `since` (or of `found`): an ended
    job's kept entry as it is (neither its attempts, nor its spec, nor its document read); the others' from their
    documents, kept or computed without the policies, and those of ended jobs then kept with their documents."""
    from spotfit.controller.hindsight import OptimumMemo
    from spotfit.controller.spend import entry_of

    kept_entries: dict[str, str] = {}
    if found is None:
        try:  # the jobs first: one whose entry is kept between the two reads is in both, and counted once
            found = db.jobs_since(since, unkept=version())
            kept_entries = db.kept_spend_entries(version(), since)
        except Exception:  # noqa: BLE001 - a state DB of an older schema, read-only: every entry is computed
            found, kept_entries = db.jobs_since(since), {}
    found = [(job, attempts) for job, attempts in found if job["id"] not in kept_entries]
    kept = _kept(db, since) if any(job["state"] in ENDED for job, _ in found) else {}
    entries = [json.loads(text) for text in kept_entries.values()]
    docs, new = {}, {}
    memo: OptimumMemo | None = None
    for job, attempts in found:
        text = kept.get(job["id"]) if job["state"] in ENDED else None
        if text is None and memo is None:
            memo = OptimumMemo(lambda key: _call(lambda: db.kept_optimum(key), None), version())
        doc = json.loads(text) if text is not None else job_cost(job, attempts, policies=False, memo=memo)
        entry = entry_of(job, attempts, doc)
        if job["state"] in ENDED:
            docs[job["id"]], new[job["id"]] = doc, entry
        entries.append(entry)
    keep(db, docs, new)
    if memo is not None and memo.new:
        _call(lambda: db.keep_optima(memo.new), None)
    return entries


def keep_ended(db: StateDB, job_id: str) -> None:
    """The controller, as a job ends: compute and keep its document and spend entry, so that `cost` and
    `cost --all` read them; a failure here never fails the job (they are computed when read)."""
    from spotfit.controller.spend import entry_of

    try:
        job = db.get_job(job_id)
        if job["state"] in ENDED:
            attempts = db.attempts(job_id)
            doc = job_cost(job, attempts)
            keep(db, {job_id: doc}, {job_id: entry_of(job, attempts, doc)})
    except Exception as exc:  # noqa: BLE001 - a cache: the job's end stands without it
        print(f"warning: the cost of job {job_id} was not kept ({type(exc).__name__}: {exc}); "
              "`spotfit cost` computes it when asked", file=sys.stderr, flush=True)


def _call(read: Callable[[], T], otherwise: T) -> T:
    """`read()`, or `otherwise` where the state DB cannot answer (an older schema read-only, locked, full): a cache."""
    try:
        return read()
    except Exception:  # noqa: BLE001 - a cache: without it, the figures are computed
        return otherwise


def _kept(db: StateDB, since: float = 0.0, job_id: str | None = None) -> dict[str, str]:
    """The kept documents of this code's version; none where the state DB cannot say (a read-only
    connection to a state DB of an older schema, which has no `job_costs` yet)."""
    return _call(lambda: db.kept_cost_docs(version(), since, job_id), {})


def keep(db: StateDB, docs: dict[str, dict[str, Any]], entries: dict[str, dict[str, Any]] | None = None) -> None:
    """Keep these ended jobs' documents (and spend entries, where given); a state DB that cannot take them now
    (read-only, locked or full) only means they are computed again next time."""
    if not docs:
        return
    try:
        db.keep_cost_docs(version(), {job_id: json.dumps(doc) for job_id, doc in docs.items()},
                          {job_id: json.dumps(entry) for job_id, entry in (entries or {}).items()})
    except Exception:  # noqa: BLE001 - a cache: whatever stops the write, the figures stand without it
        pass
