"""Rendering of status documents, tables and live progress (no logic, no state)."""

from __future__ import annotations

import time
from datetime import datetime

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts else "-"


def _usd(value: float | None) -> str:
    return f"${value:,.4f}" if value is not None else "-"


def status_table(doc: dict) -> Table:
    total = doc["total_steps"] or "?"
    title = f"{doc['id']}  [bold]{doc['state']}[/]  step {doc['step']}/{total}  cost {_usd(doc['cost_usd'])}"
    table = Table(title=title, title_justify="left")
    for col in ("#", "state", "market", "zone", "steps", "billed h", "cost"):
        table.add_column(col, justify="right" if col in ("#", "billed h", "cost") else "left")
    for a in doc["attempts"]:
        steps = f"{a['start_step'] or 0}..{a['end_step'] if a['end_step'] is not None else '…'}"
        billed = f"{a['billed_s'] / 3600:.3f}" if a["billed_s"] is not None else "-"
        table.add_row(str(a["number"]), a["state"], a["market"], a["zone"] or "-", steps, billed, _usd(a["cost_usd"]))
    return table


def print_status(console: Console, doc: dict) -> None:
    console.print(status_table(doc))
    if doc.get("message"):
        console.print(f"[dim]{doc['message']}[/]  controller: {doc['controller']}")
    if doc.get("weights_sha256"):
        console.print(f"weights sha256: {doc['weights_sha256']}")
    metrics = doc.get("metrics") or {}
    if metrics:
        console.print("final metrics: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if v is not None))


def jobs_table(rows: list[dict]) -> Table:
    table = Table()
    for col in ("id", "name", "state", "step", "created"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["id"], r["name"], r["state"], f"{r['step']}/{r['total_steps'] or '?'}", _when(r["created_at"]))
    return table


def print_events(console: Console, events: list[dict]) -> None:
    for e in events:
        attempt = f"#{e['attempt']} " if e["attempt"] else ""
        console.print(f"[dim]{_when(e['ts'])}[/] {attempt}[bold]{e['kind']}[/] {e['message']}", highlight=False)


class LiveRun:
    """Live progress of `spotfit run`: a progress bar plus one line per event."""

    def __init__(self, console: Console, status_fn, events_fn):
        self.console = console
        self.status_fn = status_fn
        self.events_fn = events_fn
        self._last_event = 0
        self._last_draw = 0.0
        self.progress = Progress(
            TextColumn("[bold]{task.fields[label]}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("loss {task.fields[loss]}"),
            TextColumn("{task.fields[cost]}"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        )
        self.task = self.progress.add_task("run", total=None, label="starting", loss="-", cost="$0")

    def __enter__(self):
        self.progress.start()
        return self

    def __exit__(self, *exc):
        self.update(force=True)
        self.progress.stop()

    def update(self, force: bool = False) -> None:
        now = time.monotonic()
        if not force and now - self._last_draw < 0.25:
            return
        self._last_draw = now
        new = self.events_fn(self._last_event)
        if new:
            self._last_event = new[-1]["id"]
            print_events(self.progress.console, new)
        doc = self.status_fn()
        attempt = doc["attempts"][-1]["number"] if doc["attempts"] else 0
        loss = f"{doc['loss']:.4f}" if doc["loss"] is not None else "-"
        self.progress.update(self.task, completed=doc["step"], total=doc["total_steps"],
                             label=f"attempt {attempt} {doc['state']}", loss=loss, cost=_usd(doc["cost_usd"]))
