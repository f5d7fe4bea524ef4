"""The `cost` verb: the job's ledger of spend, savings against on-demand, and waste."""

from __future__ import annotations

from typing import Optional

import typer
from rich.table import Table

from spotfit import sdk
from spotfit.cli.app import app, console, print_json


def _h(seconds: float | None) -> str:
    return f"{seconds / 3600:.3f}" if seconds is not None else "-"


@app.command()
def cost(
    job: Optional[str] = typer.Argument(None, help="Job id, id prefix or name (default: the latest job)."),
    json_: bool = typer.Option(False, "--json", help="Print one JSON document on stdout."),
) -> None:
    """Show what a job cost per attempt, what all-on-demand would have cost, and the waste."""
    doc = sdk.cost(job)
    if json_:
        print_json(doc)
        return
    table = Table(title=f"ledger of {doc['id']} ({doc['state']}), trace time and prices", title_justify="left")
    for col in ("#", "outcome", "market", "zone", "steps", "start h", "end h", "billed h", "$/h", "cost"):
        table.add_column(col, justify="left" if col in ("outcome", "market", "zone") else "right")
    origin = doc["rows"][0]["start_s"] if doc["rows"] else 0.0
    for r in doc["rows"]:
        table.add_row(str(r["attempt"]), r["state"], r["market"], r["zone"] or "-",
                      f"{r['start_step'] or 0}..{r['end_step'] or 0}", _h(r["start_s"] - origin),
                      _h(r["end_s"] - origin), _h(r["billed_s"]), f"{r['price_usd_per_h']:.3f}",
                      f"${r['cost_usd']:.4f}")
    console.print(table)
    t = doc["totals"]
    console.print(f"spent ${t['spent_usd']:.4f}", highlight=False)
    if t["on_demand_usd"] is not None:
        console.print(f"all on-demand would have cost ${t['on_demand_usd']:.4f}: "
                      f"saved ${t['savings_usd']:.4f} ({t['savings_pct']:.1f}%)", highlight=False)
    console.print(f"waste: {t['steps_redone']} steps redone, {t['restart_overhead_s'] / 3600:.3f} h of restart "
                  f"overhead (${t['waste_usd']:.4f})", highlight=False)
