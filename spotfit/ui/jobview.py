"""What the job page draws, as plain data: the timeline over the market, the cost curve, rule firings.

Pure functions over the documents `spotfit status --json`, `cost --json` and `logs --json`
print, plus the job's replayed market (`MarketReplay`, the one the controller billed with):

- `timeline`: each attempt as a span on its row (a spot zone, or on-demand), each zone's spot
  availability from the trace as spans under it, preemptions and switches at the trace second
  the controller recorded them;
- `cost_curve`: the money spent over trace time (each attempt priced tick by tick as the replay
  bills it, ending exactly at the ledger's cost), against one uninterrupted on-demand run of the
  same work (the ledger's `on_demand_usd`);
- `rule_firings`: each rule verdict and the money its rule says it saved.

Example:

>>> doc = {"rows": [{"attempt": 1, "market": "on_demand", "zone": None, "start_s": 0.0, "end_s": 3600.0,
...                  "cost_usd": 3.0}], "totals": {"spent_usd": 3.0, "on_demand_usd": 3.0}}
>>> curve = cost_curve(doc, replay=None)
>>> curve["spent"][-1], curve["on_demand"][-1]
((3600.0, 3.0), (3600.0, 3.0))
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

import numpy as np

from spotfit.market.replay import MarketReplay
from spotfit.market.trace import Trace, load_trace, resolve_trace

ON_DEMAND_ROW = "on-demand"
MARGIN_TICKS = 4  # market shown either side of the job's span, for context
RULE_EVENTS = ("rule", "budget_limit", "team_budget")


@lru_cache(maxsize=4)
def _trace(name: str, gap_s: float | None) -> Trace:
    """A trace, loaded once per process (loading the bundled one takes most of a second)."""
    return load_trace(resolve_trace(name), gap_s=gap_s)


def market_of(spec: dict) -> MarketReplay | None:
    """The replayed market a job ran on (its recorded spec's `market`), or None without a trace."""
    market = spec.get("market") or {}
    if not market.get("trace"):
        return None
    start = datetime.fromisoformat(market["start"]) if market.get("start") else None
    return MarketReplay(_trace(market["trace"], market.get("gap_s")), list(market.get("zones") or []),
                        float(market.get("time_scale") or 1.0), start)


def job_span_s(status: dict, now_s: float | None) -> tuple[float, float] | None:
    """Trace seconds from the first launch to the last end (or `now_s` while one runs)."""
    starts = [a["trace_start_s"] for a in status["attempts"] if a["trace_start_s"] is not None]
    if not starts:
        return None
    ends = [a["trace_end_s"] for a in status["attempts"] if a["trace_end_s"] is not None]
    return min(starts), max([*ends, *([now_s] if now_s is not None else []), min(starts)])


def timeline(status: dict, events: list[dict], replay: MarketReplay | None, now_s: float | None) -> dict:
    """Rows, attempt spans, availability spans and markers, in trace seconds (see the module doc)."""
    zones = list(replay.zones) if replay else sorted({a["zone"] for a in status["attempts"] if a["zone"]})
    attempts = []
    for a in status["attempts"]:
        if a["trace_start_s"] is None:
            continue
        end = a["trace_end_s"] if a["trace_end_s"] is not None else (now_s or a["trace_start_s"])
        attempts.append({"number": a["number"], "market": a["market"], "state": a["state"],
                         "row": a["zone"] if a["market"] == "spot" else ON_DEMAND_ROW,
                         "start_s": a["trace_start_s"], "end_s": max(end, a["trace_start_s"]),
                         "steps": [a["start_step"], a["end_step"]], "cost_usd": a["cost_usd"]})
    by_number = {a["number"]: a for a in status["attempts"]}
    markers = []
    for e in events:
        if e["kind"] not in ("preemption_notice", "switch") or e["data"].get("trace_s") is None:
            continue
        attempt = by_number.get(e["attempt"]) or {}
        row = attempt.get("zone") if attempt.get("market") == "spot" else ON_DEMAND_ROW
        markers.append({"kind": "preemption" if e["kind"] == "preemption_notice" else "switch",
                        "trace_s": float(e["data"]["trace_s"]), "row": row or ON_DEMAND_ROW,
                        "attempt": e["attempt"], "message": e["message"]})
    span = job_span_s(status, now_s)
    available = _availability(replay, span) if replay and span else []
    return {"rows": [*zones, ON_DEMAND_ROW], "attempts": attempts, "markers": markers, "available": available,
            "gap_s": replay.gap_s if replay else None}


def _availability(replay: MarketReplay, span: tuple[float, float]) -> list[dict]:
    """Each zone's runs of available ticks around `span`, as (zone, start_s, end_s)."""
    first, last = replay.tick_at(span[0]) - MARGIN_TICKS, replay.tick_at(span[1]) + MARGIN_TICKS
    first, last = max(first, 0), min(last, replay.trace.n_ticks - 1)
    tick0_s = _tick_start_s(replay, first)
    out = []
    for z, zone in enumerate(replay.zones):
        up = replay.trace.available[z, first:last + 1]
        edges = np.flatnonzero(np.diff(np.concatenate(([0], up.astype(np.int8), [0]))))
        for begin, end in zip(edges[::2], edges[1::2], strict=True):
            out.append({"zone": zone, "start_s": tick0_s + int(begin) * replay.gap_s,
                        "end_s": tick0_s + int(end) * replay.gap_s})
    return out


def _tick_start_s(replay: MarketReplay, tick: int) -> float:
    """The absolute trace second at which `tick` of the replay's trace starts."""
    start = replay.trace.start if replay.trace.start.tzinfo else replay.trace.start.replace(tzinfo=UTC)
    return start.timestamp() + tick * replay.gap_s


def cost_curve(cost: dict, replay: MarketReplay | None, running: dict | None = None,
               now_s: float | None = None) -> dict:
    """`spent`: (trace s, USD) points; `on_demand`: the all-on-demand line; `running`: the unbilled tail.

    Each ended attempt is priced at the replay's tick boundaries and ends at its recorded cost;
    between attempts (waiting) the line is flat. `running` (the live attempt, from `status`)
    adds its cost so far up to `now_s`, apart, because the ledger bills it only when it ends.
    """
    spent: list[tuple[float, float]] = []
    total = 0.0
    for row in sorted(cost["rows"], key=lambda r: r["attempt"]):
        if row["start_s"] is None or row["end_s"] is None:
            continue
        spent.append((row["start_s"], total))
        if replay is not None and row["market"] == "spot" and row["zone"]:
            t = _tick_start_s(replay, replay.tick_at(row["start_s"]) + 1)
            while t < row["end_s"]:
                spent.append((t, total + min(replay.cost_usd("spot", row["zone"], row["start_s"], t)[1],
                                             row["cost_usd"])))
                t += replay.gap_s
        total += row["cost_usd"]
        spent.append((row["end_s"], round(total, 6)))
    tail: list[tuple[float, float]] = []
    if running is not None and replay is not None and now_s is not None and running["trace_start_s"] is not None:
        start = running["trace_start_s"]
        so_far = replay.cost_usd(running["market"], running["zone"], start, max(now_s, start))[1]
        tail = [(start, total), (max(now_s, start), round(total + so_far, 6))]
    on_demand: list[tuple[float, float]] = []
    od_usd = cost["totals"].get("on_demand_usd")
    if spent and od_usd:
        origin = spent[0][0]
        rate = replay.on_demand_usd_per_h() if replay else None
        duration_s = od_usd / rate * 3600.0 if rate else spent[-1][0] - origin
        on_demand = [(origin, 0.0), (origin + duration_s, od_usd)]
    return {"spent": spent, "running": tail, "on_demand": on_demand}


def rule_firings(events: list[dict]) -> dict:
    """The rule verdicts among `events` and the money their rules say each saved."""
    firings: list[dict[str, Any]] = [
        {"ts": e["ts"], "attempt": e["attempt"], "rule": e["data"].get("rule", e["kind"]),
         "action": e["data"].get("action"), "message": e["message"], "saved_usd": e["data"].get("saved_usd")}
        for e in events if e["kind"] in RULE_EVENTS]
    return {"firings": firings, "saved_usd": round(sum(f["saved_usd"] or 0.0 for f in firings), 6)}


def log_tail(text: str, lines: int = 80) -> str:
    """The last `lines` lines of an attempt's log."""
    return "\n".join(text.splitlines()[-lines:])
