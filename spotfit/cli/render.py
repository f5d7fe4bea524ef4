"""Rendering of the SDK's documents: tables, lines and live progress (no logic, no state).

Every function takes a document an SDK function returned (the verb's `--json` document) and
draws it; nothing here computes, loads or decides.
"""

from __future__ import annotations

import json
import time
from datetime import datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


def _when(ts: float | None) -> str:
    return datetime.fromtimestamp(ts).strftime("%H:%M:%S") if ts else "-"


def _usd(value: float | None) -> str:
    """Dollars to 4 places, of the value rounded to 6 as the ledger stores it: `status` and `cost` print the same.

    >>> _usd(0.2983499), f"${round(0.2983499, 6):.4f}"
    ('$0.2984', '$0.2984')
    """
    return f"${round(value, 6):,.4f}" if value is not None else "-"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"


def _money(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _h(seconds: float | None) -> str:
    return f"{seconds / 3600:.3f}" if seconds is not None else "-"


def status_table(doc: dict) -> Table:
    total = doc["total_steps"] or "?"
    if doc.get("total_steps_estimated"):
        total = f"~{total} (estimate)"
    title = f"{doc['id']}  [bold]{doc['state']}[/]  step {doc['step']}/{total}  cost {_usd(doc['cost_usd'])}"
    table = Table(title=title, title_justify="left")
    for col in ("#", "state", "market", "zone", "steps", "billed h", "cost"):
        table.add_column(col, justify="right" if col in ("#", "billed h", "cost") else "left")
    for a in doc["attempts"]:
        steps = f"{a['start_step'] or 0}..{a['end_step'] if a['end_step'] is not None else '…'}"
        billed = f"{a['billed_s'] / 3600:.3f}" if a["billed_s"] is not None else "-"
        table.add_row(str(a["number"]), a["state"], a["market"], a["zone"] or "-", steps, billed, _usd(a["cost_usd"]))
    return table


def gpu_line(gpu: dict) -> str:
    """`status`'s GPU line: the last attempt's latest reading, or that it had no GPU.

    >>> gpu_line({"attempt": 2, "util_pct": 87.0, "mem_pct": 40.0, "mem_used_gib": 6.4, "mem_total_gib": 16.0,
    ...           "count": 1})
    'gpu: 87% busy, memory 6.4 of 16.0 GiB (40%), 1 GPU (attempt 2)'
    >>> gpu_line({"attempt": 1, "count": 0, "note": "no GPU (NVML found no GPU): ..."})
    'gpu: none on attempt 1 (no GPU (NVML found no GPU): ...)'
    """
    if not gpu.get("count"):
        return f"gpu: none on attempt {gpu['attempt']} ({gpu.get('note') or 'no GPU'})"
    plural = "GPU" if gpu["count"] == 1 else "GPUs"
    return (f"gpu: {gpu['util_pct']:.0f}% busy, memory {gpu['mem_used_gib']:.1f} of {gpu['mem_total_gib']:.1f} GiB "
            f"({gpu['mem_pct']:.0f}%), {gpu['count']} {plural} (attempt {gpu['attempt']})")


def print_status(console: Console, doc: dict) -> None:
    console.print(status_table(doc))
    paused = doc.get("paused")
    if paused:
        line = f"paused ({paused['rule'] or 'rule'}, {paused['reason']})"
        resume = f"resume with `{paused['resume']}`" if paused["resume"] else "controller alive: resumes by itself"
        console.print(escape(f"{line}  {resume}"), highlight=False)
    elif doc.get("message") or doc.get("resume"):
        controller = doc["controller"] + (f" — run `{doc['resume']}`" if doc.get("resume") else "")
        console.print(f"[dim]{escape(doc['message'] or '')}[/]  controller: {escape(controller)}")
    if doc.get("store_problem"):
        console.print(f"[yellow]store:[/] {escape(doc['store_problem'])}", highlight=False)
    if doc.get("gpu"):
        console.print(escape(gpu_line(doc["gpu"])), highlight=False)
    if doc.get("weights_sha256"):
        console.print(f"weights sha256: {doc['weights_sha256']}")
    export = doc.get("export") or {}
    if export.get("error"):
        console.print(f"[red]export failed:[/] {escape(export['error'])} (the weights are in the checkpoints: "
                      f"`spotfit logs {doc['id']}`)", highlight=False)
    elif export.get("url"):
        console.print(f"exported: version {export['version']} at {export['url']}", highlight=False)
    metrics = doc.get("metrics") or {}
    if metrics:
        console.print("final metrics: " + ", ".join(f"{k}={v:.4f}" for k, v in metrics.items() if v is not None))
    for offer in doc.get("offers") or []:
        console.print(escape(f"offer: {offer['message']}"), highlight=False)


def jobs_table(rows: list[dict]) -> Table:
    """Jobs newest first; the jobs of a batch or sweep together, under its id, where its newest is."""
    table = Table()
    for col in ("id", "name", "state", "step", "created"):
        table.add_column(col)
    order = list(dict.fromkeys(r.get("group") or r["id"] for r in rows))
    for key in order:
        members = [r for r in rows if (r.get("group") or r["id"]) == key]
        if members[0].get("group"):
            table.add_row(f"[bold]{key}[/]", "", "", "", "", end_section=False)
        for r in members:
            indent = "  " if r.get("group") else ""
            table.add_row(indent + r["id"], r["name"], r["state"], f"{r['step']}/{r['total_steps'] or '?'}",
                          _when(r["created_at"]))
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


# market verbs ----------------------------------------------------------------------------------


def simulate_table(doc: dict, work_h: float, deadline_h: float, overhead_h: float, starts: int) -> Table:
    """`spotfit simulate`: one row per policy and scope."""
    table = Table(title=f"{Path(doc['trace']).name}: {work_h:g} h work, {deadline_h:g} h deadline, "
                        f"{overhead_h:g} h overhead, {starts} starts")
    for col in ("policy", "scope", "runs", "mean $", "× optimum (mean)", "× optimum (worst)",
                "misses", "launches"):
        table.add_column(col, justify="left" if col in ("policy", "scope") else "right")
    for s in doc["summary"]:
        table.add_row(s["policy"], s["scope"], str(s["runs"]), f"{s['mean_cost_usd']:.2f}",
                      _ratio(s["mean_ratio_to_optimum"]), _ratio(s["worst_ratio_to_optimum"]),
                      str(s["misses"]), f"{s['mean_launches']:.1f}")
    return table


def catalog_table(doc: dict) -> Table:
    """`spotfit catalog`: one row per offer."""
    offers = doc["offers"]
    table = Table(title=f"{len(offers)} offers")
    for col in ("cloud", "region", "zone", "instance", "accelerator", "on-demand $/h", "spot $/h", "price of"):
        table.add_column(col)
    for o in offers:
        table.add_row(o["cloud"], o["region"], o["zone"] or "", o["instance_type"] or "",
                      f"{o['accelerator']}×{o['count']:g}", _money(o["on_demand_usd_per_h"]),
                      _money(o["spot_usd_per_h"]), "machine" if o["vm_included"] else "GPU only (+ host VM)")
    return table


def print_plan(console: Console, doc: dict) -> None:
    """`spotfit plan`: simulated offers, then catalog-only ones, then notes and the recommendation."""
    title = f"{doc['accelerator']}×{doc['count']}: {doc['work_h']:.4g} h work, {doc['deadline_h']:.4g} h deadline"
    history = [o for o in doc["offers"] if o["basis"] == "history"]
    catalog = [o for o in doc["offers"] if o["basis"] == "catalog"]
    if history:
        trace = Path(doc["trace"]).name if doc["trace"] else "-"
        console.print(_plan_table(f"{title}: simulated on {trace} with policy {doc['policy']}", history))
    if catalog:
        prior = f"spot available {doc['availability_prior']:.0%} of the time (prior)" if doc["spot"] else "on-demand"
        console.print(_plan_table(f"{title}: no history, catalog prices, {prior}", catalog))
    for note in doc["notes"]:
        console.print(f"note: {note}", highlight=False)
    others = sorted({o["cloud"] for o in doc["offers"] if not o["launchable"]})
    if others and not doc["all_clouds"]:
        console.print(f"{', '.join(others)}: listed for comparison; spotfit cannot launch there "
                      "(--all-clouds lets the recommendation go there)", highlight=False)
    rec = doc["recommended"]
    if rec:
        console.print(f"recommended: #{rec['rank']} {rec['cloud']} {rec['region']} {rec['instance_type'] or ''} "
                      f"({', '.join(rec['zones']) or 'any zone'}) with policy {rec['policy']}: "
                      f"expected ${rec['expected_cost_usd']:.2f}", highlight=False)
    else:
        console.print("recommended: none (no offer on a cloud spotfit can launch on; --all-clouds shows the "
                      "cheapest anyway)", highlight=False)


def _plan_table(title: str, offers: list[dict]) -> Table:
    table = Table(title=title, title_justify="left")
    risk = any(o["worst_cost_usd"] is not None for o in offers)
    right = ["#", "spot $/h", "on-demand $/h", "expected $", *(_RISK if risk else []), "preemptions", "finish h"]
    for col in ("#", "cloud", "region", "zones", "instance", "spot $/h", "on-demand $/h", "expected $",
                *(_RISK if risk else []), "preemptions", "finish h", "policy", "launch"):
        table.add_column(col, justify="right" if col in right else "left")
    for o in offers:
        zones = "all" if len(o["zones"]) > 3 else ",".join(o["zones"])
        pre = "?" if o["expected_preemptions"] is None else f"{o['expected_preemptions']:.1f}"
        spread = [f"{o['cost_p10_usd']:.2f}-{o['cost_p90_usd']:.2f}", f"{o['worst_cost_usd']:.2f}",
                  f"{o['above_on_demand_share']:.0%}"] if risk else []
        table.add_row(str(o["rank"]), o["cloud"], o["region"], zones, o["instance_type"] or "",
                      _money(o["spot_usd_per_h"]), _money(o["on_demand_usd_per_h"]),
                      f"{o['expected_cost_usd']:.2f}", *spread, pre, f"{o['finish_h']:.1f}", o["policy"],
                      "yes" if o["launchable"] else "no")
    return table


_RISK = ("p10-p90 $", "worst $", "> on-demand")  # over the history windows simulated


def print_cost(console: Console, doc: dict) -> None:
    """`spotfit cost`: the ledger per attempt, then spend, savings and waste."""
    table = Table(title=f"ledger of {doc['id']} ({doc['state']}), trace time and prices", title_justify="left")
    moved = len({r.get("runs_on") for r in doc["rows"]}) > 1  # `spotfit resume --accelerator ...`: say where each ran
    cols = ("#", "outcome", "market", "zone", *(("runs on",) if moved else ()), "steps", "start h", "end h",
            "billed h", "$/h", "cost")
    for col in cols:
        table.add_column(col, justify="left" if col in ("outcome", "market", "zone", "runs on") else "right")
    origin = doc["rows"][0]["start_s"] if doc["rows"] else 0.0
    for r in doc["rows"]:
        table.add_row(str(r["attempt"]), r["state"], r["market"], r["zone"] or "-",
                      *((r.get("runs_on") or "-",) if moved else ()),
                      f"{r['start_step'] or 0}..{r['end_step'] or 0}", _h(r["start_s"] - origin),
                      _h(r["end_s"] - origin), _h(r["billed_s"]), f"{r['price_usd_per_h']:.3f}",
                      _usd(r["cost_usd"]))
    console.print(table)
    t = doc["totals"]
    console.print(f"spent ${t['spent_usd']:.4f}", highlight=False)
    if t["on_demand_usd"] is not None:
        console.print(f"all on-demand would have cost ${t['on_demand_usd']:.4f}: "
                      f"saved ${t['savings_usd']:.4f} ({t['savings_pct']:.1f}%)", highlight=False)
    console.print(f"waste: {t['steps_redone']} steps redone, {t['restart_overhead_s'] / 3600:.3f} h of restart "
                  f"overhead (${t['waste_usd']:.4f})", highlight=False)
    seen = doc["hindsight"]
    if seen["window"] is None:
        console.print(f"hindsight: none, {seen['note']}", highlight=False)
        return
    w = seen["window"]
    console.print(f"hindsight in the job's window: {', '.join(w['zones'])} from {w['start'][:16]} UTC, "
                  f"{w['work_h']:.3f} h of work, {w['deadline_h']:g} h deadline, {w['overhead_h']:g} h overhead",
                  highlight=False)
    console.print(_hindsight_table(doc))
    if t["regret"] is not None:
        console.print(f"regret {t['regret']:.3f}: spent ${t['spent_usd']:.4f} ÷ optimum ${t['optimum_usd']:.4f}",
                      highlight=False)


def _hindsight_table(doc: dict) -> Table:
    """What the optimum and each policy would have paid in the job's window, cheapest first."""
    w, t = doc["hindsight"]["window"], doc["totals"]
    table = Table()
    for col in ("policy", "would pay", "× optimum", "deadline"):
        table.add_column(col, justify="left" if col in ("policy", "deadline") else "right")
    paid = sorted([("optimum", t["optimum_usd"]), *t["policies"].items()], key=lambda p: p[1])
    for name, usd in paid:
        label = f"{name} (this job's policy)" if name == doc["policy"] else name
        ratio = _ratio(usd / t["optimum_usd"]) if t["optimum_usd"] else "-"
        table.add_row(label, f"${usd:.4f}", ratio, "missed" if name in w["missed_deadline"] else "met")
    return table


def print_spend(console: Console, doc: dict) -> None:
    """`spotfit cost --all`: spend, savings, waste and regret per group, then the totals."""
    table = Table(title=f"spend by {doc['by']} over the jobs created since {doc['since']} ({doc['window']})",
                  title_justify="left")
    for col in (doc["by"], "jobs", "spent", "on-demand", "saved", "saved %", "waste", "regret"):
        table.add_column(col, justify="left" if col == doc["by"] else "right")
    for g in [*doc["groups"], {"group": "total", **doc["totals"]}]:
        pct = "-" if g["savings_pct"] is None else f"{g['savings_pct']:.1f}%"
        table.add_row(g["group"], str(g["jobs"]), _usd(g["spent_usd"]), _usd(g["on_demand_usd"]),
                      _usd(g["savings_usd"]), pct, _usd(g["waste_usd"]), _ratio(g["regret"]),
                      end_section=bool(doc["groups"]) and g is doc["groups"][-1])
    console.print(table)


def print_budgets(console: Console, doc: dict) -> None:
    """`spotfit budget list`: each budget, what its jobs spent this period, and what happens at 80 % and 100 %."""
    where = doc["path"] + (f" and {doc['shared']}" if doc.get("shared") else "")
    table = Table(title=f"budgets over many jobs ({where})", title_justify="left")
    for col in ("name", "kept in", "jobs with labels", "period", "budget", "spent", "used", "at 80%", "at 100%"):
        table.add_column(col, justify="right" if col in ("budget", "spent", "used") else "left")
    for b in doc["budgets"]:
        scope = ", ".join(f"{k}={v}" for k, v in b["labels"].items()) or "(every job)"
        table.add_row(b["name"], b.get("where", "file"), scope, b["period"], _usd(b["usd"]), _usd(b["spent_usd"]),
                      f"{b['percent']:.1f}%", b["at_80_percent"], b["at_100_percent"])
    console.print(table)


# tools -----------------------------------------------------------------------------------------

_CHECK_COLOUR = {"ok": "green", "warn": "yellow", "fail": "red"}


def doctor_table(report: dict) -> Table:
    """`spotfit doctor`: one row per check, coloured by status."""
    table = Table(title="spotfit doctor", title_justify="left")
    for col in ("check", "status", "detail", "fix"):
        table.add_column(col)
    for c in report["checks"]:
        table.add_row(escape(c["name"]), f"[{_CHECK_COLOUR[c['status']]}]{c['status']}[/]", escape(c["detail"]),
                      escape(c["fix"]))
    return table


def print_gc(console: Console, doc: dict) -> None:
    """`spotfit gc`: per region (aws) or zone (gcp), what was (or would be) removed and what was kept."""
    verb = "would remove" if doc["dry_run"] else "removed"
    for entry in doc["regions"]:
        found = entry["found"]
        console.print(f"{entry['region']}: {verb} {entry['count']} resource(s)", highlight=False)
        for kind in ("instances", "spot_requests", "placement_groups", "security_groups", "disks"):
            for rid, owner in found.get(kind, {}).items():
                console.print(f"  {kind[:-1].replace('_', ' ')} {rid}  (job {owner})", highlight=False)
        for rid, source in found.get("snapshots", {}).items():
            console.print(f"  data snapshot {rid}  (of {source}, no job uses it)", highlight=False)
        for rid in entry.get("still_in_use", []):
            console.print(f"  still in use, left for the next gc: {rid}", highlight=False)
    secrets = doc.get("secrets", [])
    backends = doc.get("backends") or [None]
    ssm = {"name": "ssm", "what": "secret parameters", "item": "parameter"}  # aws's, which says nothing
    stores = doc.get("secret_stores") or {backends[0]: doc.get("secret_store")}
    for name in backends:
        words = stores.get(name) or ssm
        mine = [e for e in secrets if e.get("backend", backends[0]) == name]
        console.print(f"{words['name']}: {verb} the {words['what']} of {len(mine)} ended job(s)", highlight=False)
        for entry in mine:
            for rid in entry["parameters"]:
                console.print(f"  {words['item']} {rid}  ({entry['region']}, job {entry['job']})", highlight=False)
    for skipped in doc.get("skipped", []):
        console.print(f"{skipped['backend']}: skipped ({skipped['reason']})", highlight=False)
    if doc["kept_jobs"]:
        console.print(f"kept the resources of {len(doc['kept_jobs'])} active job(s); --include-active removes "
                      "them too (never their secrets)", highlight=False)


def print_dry_run(console: Console, doc: dict) -> None:
    """`spotfit run --backend NAME --dry-run`: the calls or manifests, in order (nothing was sent), and the scripts
    they carry (`scripts`: title and text) once more as plain text."""
    if "objects" in doc:
        _print_manifests(console, doc)
        return
    console.print(f"dry run: job {doc['job_id']} attempt 1 in {doc['zone'] or 'any zone'} — nothing sent",
                  highlight=False)
    if doc.get("disk"):
        console.print(f"disk: {doc['disk']}", highlight=False)
    for call in doc["calls"]:
        params = dict(call["params"])
        user_data = params.pop("UserData", None)
        console.rule(call["operation"])
        console.out(json.dumps(params, indent=2), highlight=False)
        if user_data is not None:
            console.rule("UserData (cloud-init, sent base64-encoded)")
            console.out(user_data, highlight=False)
    for script in doc.get("scripts", []):  # a script sent inside a call's body, shown once as text
        console.rule(script["title"])
        console.out(script["text"], highlight=False)
    for warning in doc["warnings"]:
        console.print(f"[yellow]warning:[/] {warning}", highlight=False)


def _print_manifests(console: Console, doc: dict) -> None:
    """The kubernetes dry run: the objects as one YAML stream, `kubectl apply -f -` ready."""
    import yaml

    class Dumper(yaml.SafeDumper):
        """Multi-line strings (the container's script) as `|` blocks."""

    def text(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)

    Dumper.add_representer(str, text)
    console.print(f"# dry run: job {doc['job_id']} attempt 1 ({doc['market']}, {doc['kind']}) — nothing sent",
                  highlight=False)
    console.out(yaml.dump_all(doc["objects"], Dumper=Dumper, sort_keys=False), highlight=False)
    for warning in doc["warnings"]:
        console.print(f"# [yellow]warning:[/] {warning}", highlight=False)
