"""Plotly figures (plain JSON: data + layout) for the dashboard's charts; plotly.js draws them.

Each function takes the plain data `jobview` and the SDK give and returns one figure. Times
are trace times, written as UTC date strings that Plotly's date axes read; trace names are
stable, so the page (and its browser tests) find the same series after every live update.

Example:

>>> fig = cost_figure({"spent": [(0.0, 0.0), (3600.0, 1.5)], "running": [], "on_demand": []})
>>> fig["data"][0]["name"], fig["data"][0]["x"][-1], fig["data"][0]["y"][-1]
('spent', '1970-01-01 01:00:00', 1.5)
"""

from __future__ import annotations

from datetime import UTC, datetime

COLORS = {"spot": "#2e7d32", "on_demand": "#1565c0", "available": "rgba(46,125,50,0.18)",
          "preemption": "#c62828", "switch": "#ef6c00", "running": "#9e9e9e"}
_BASE_LAYOUT = {"margin": {"l": 70, "r": 20, "t": 60, "b": 50}, "height": 300,
                "legend": {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"},
                "paper_bgcolor": "white", "plot_bgcolor": "white"}


def iso(trace_s: float) -> str:
    """A trace second as the UTC date string a Plotly date axis reads (millisecond precision)."""
    text = datetime.fromtimestamp(trace_s, UTC).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
    return text[:-4] if text.endswith(".000") else text


def _layout(title: str, **extra) -> dict:
    return {**_BASE_LAYOUT, "title": {"text": title, "font": {"size": 14}, "x": 0.01, "xanchor": "left"}, **extra}


def cost_figure(curve: dict) -> dict:
    """Money spent over trace time, the running attempt's unbilled cost, and the all-on-demand line."""
    def line(name: str, points: list, color: str, dash: str = "solid") -> dict:
        return {"type": "scatter", "mode": "lines+markers" if name == "spent" else "lines", "name": name,
                "x": [iso(t) for t, _ in points], "y": [usd for _, usd in points],
                "line": {"color": color, "dash": dash, "shape": "linear"}, "marker": {"size": 4},
                "hovertemplate": "%{x}<br>$%{y:.4f}<extra>" + name + "</extra>"}

    data = [line("spent", curve["spent"], COLORS["spot"])]
    if curve["running"]:
        data.append(line("running (billed when it ends)", curve["running"], COLORS["running"], "dot"))
    if curve["on_demand"]:
        data.append(line("all on-demand", curve["on_demand"], COLORS["on_demand"], "dash"))
    return {"data": data, "layout": _layout("Cost over trace time (USD)",
                                            yaxis={"title": {"text": "USD"}, "rangemode": "tozero"},
                                            xaxis={"type": "date", "title": {"text": "trace time (UTC)"}})}


def spend_figure(doc: dict) -> dict:
    """`spotfit cost --all`'s spend per UTC day, one stacked bar per group (the document's `days`)."""
    days = sorted({d["day"] for d in doc["days"]})
    spent = {(d["day"], d["group"]): d["spent_usd"] for d in doc["days"]}
    data = [{"type": "bar", "name": g["group"], "x": days, "y": [spent.get((day, g["group"]), 0.0) for day in days],
             "hovertemplate": "%{x}<br>$%{y:.4f}<extra>" + g["group"] + "</extra>"} for g in doc["groups"]]
    return {"data": data, "layout": _layout(f"Spend per day by {doc['by']} (USD, the day each attempt was launched)",
                                            barmode="stack", yaxis={"title": {"text": "USD"}, "rangemode": "tozero"},
                                            xaxis={"type": "category", "title": {"text": "day (UTC)"}})}


def timeline_figure(tl: dict) -> dict:
    """Attempts (one bar each) on their rows over the zones' spot availability, with markers."""
    ms = 1000.0
    available = tl["available"]
    attempts = tl["attempts"]
    data: list[dict] = [{
        "type": "bar", "orientation": "h", "name": "spot available (trace)", "y": [a["zone"] for a in available],
        "base": [iso(a["start_s"]) for a in available], "x": [(a["end_s"] - a["start_s"]) * ms for a in available],
        "marker": {"color": COLORS["available"]}, "width": 0.9, "hoverinfo": "skip",
    }, {
        "type": "bar", "orientation": "h", "name": "attempts", "y": [a["row"] for a in attempts],
        "base": [iso(a["start_s"]) for a in attempts], "x": [(a["end_s"] - a["start_s"]) * ms for a in attempts],
        "marker": {"color": [COLORS["spot"] if a["market"] == "spot" else COLORS["on_demand"] for a in attempts]},
        "width": 0.4, "text": [f"#{a['number']}" for a in attempts], "textposition": "inside",
        "customdata": [[a["number"], a["state"], a["steps"][0], a["steps"][1]] for a in attempts],
        "hovertemplate": "attempt %{customdata[0]} (%{customdata[1]})<br>steps %{customdata[2]}→%{customdata[3]}"
                         "<extra></extra>",
    }]
    for kind, name, symbol in (("preemption", "preemptions", "x"), ("switch", "switches", "triangle-right")):
        marks = [m for m in tl["markers"] if m["kind"] == kind]
        data.append({"type": "scatter", "mode": "markers", "name": name, "x": [iso(m["trace_s"]) for m in marks],
                     "y": [m["row"] for m in marks], "text": [m["message"] for m in marks],
                     "marker": {"symbol": symbol, "size": 14, "color": COLORS[kind], "line": {"width": 2}},
                     "hovertemplate": "%{x}<br>%{text}<extra></extra>"})
    return {"data": data, "layout": _layout(
        "Attempts over the market", barmode="overlay", height=120 + 40 * len(tl["rows"]),
        xaxis={"type": "date", "title": {"text": "trace time (UTC)"}},
        yaxis={"type": "category", "categoryorder": "array", "categoryarray": list(reversed(tl["rows"]))})}


def progress_figure(series: dict[str, list[tuple[int, float]]]) -> dict:
    """The loss by global step (top), the epoch metrics by epoch, and, with a GPU, its use by step (bottom).

    The runtime's `system/gpu_util` and `system/gpu_mem` scalars (percent; runtime/tensorboard.py)
    get a third row only when the job logged them.

    >>> fig = progress_figure({"train/batch_loss": [(1, 0.5)], "train/system/gpu_util": [(1, 80.0)]})
    >>> [(t["name"], t["yaxis"]) for t in fig["data"]], fig["layout"]["yaxis3"]["title"]["text"]
    ([('train/batch_loss', 'y'), ('train/system/gpu_util', 'y3')], 'GPU %')
    """
    data = []
    gpu = any("/system/gpu_" in name for name in series)
    for name, points in series.items():
        row = "3" if "/system/gpu_" in name else "" if name.endswith("batch_loss") else "2"
        data.append({"type": "scatter", "mode": "lines+markers" if row == "2" else "lines", "name": name,
                     "x": [p[0] for p in points], "y": [p[1] for p in points],
                     "xaxis": f"x{row}", "yaxis": f"y{row}"})
    rows = {"xaxis3": {"title": {"text": "global step"}},
            "yaxis3": {"title": {"text": "GPU %"}, "range": [0, 100]}} if gpu else {}
    return {"data": data, "layout": _layout(
        "Training progress", height=620 if gpu else 420, grid={"rows": 3 if gpu else 2, "columns": 1,
                                                               "pattern": "independent"},
        xaxis={"title": {"text": "global step"}}, yaxis={"title": {"text": "loss"}},
        xaxis2={"title": {"text": "epoch"}, "dtick": 1}, yaxis2={"title": {"text": "epoch metrics"}}, **rows)}


def plan_figure(plan: dict) -> dict:
    """The ranked offers of a plan: expected cost per offer, cheapest first, launchable ones solid."""
    offers = plan["offers"]
    labels = [f"#{o['rank']} {o['cloud']} {o['region']} {o['instance_type'] or ''} ({o['basis']})" for o in offers]
    return {"data": [{
        "type": "bar", "orientation": "h", "name": "expected cost", "y": labels,
        "x": [o["expected_cost_usd"] for o in offers],
        "marker": {"color": [COLORS["spot"] if o["launchable"] else COLORS["running"] for o in offers]},
        "customdata": [[o["finish_h"], o["expected_preemptions"]] for o in offers],
        "hovertemplate": "$%{x:.2f}<br>finish in %{customdata[0]:.2f} h<br>"
                         "preemptions %{customdata[1]}<extra></extra>",
    }], "layout": _layout(f"Expected cost of {plan['work_h']:g} h of work on {plan['count']}×{plan['accelerator']}",
                          height=120 + 28 * len(offers), xaxis={"title": {"text": "expected USD"}},
                          yaxis={"autorange": "reversed", "automargin": True})}


def _axis_values(values: list) -> dict:
    """A parallel-coordinates dimension's values: numbers as they are, other choices as ticks."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return {"values": values}
    labels = sorted({str(v) for v in values})
    return {"values": [labels.index(str(v)) for v in values], "tickvals": list(range(len(labels))),
            "ticktext": labels}


def sweep_parallel_figure(doc: dict, metric: str) -> dict | None:
    """Each trial with a value as one line through its parameters to the objective (None: no value yet)."""
    done = [t for t in doc["trials"] if t["value"] is not None]
    if not done:
        return None
    names = sorted({name for t in done for name in t["params"]})
    dimensions = [{"label": name, **_axis_values([t["params"].get(name) for t in done])} for name in names]
    values = [t["value"] for t in done]
    dimensions.append({"label": metric, "values": values})
    return {"data": [{"type": "parcoords", "name": "trials", "dimensions": dimensions,
                      "line": {"color": values, "colorscale": "Viridis", "showscale": True}}],
            "layout": _layout(f"Parameters against {metric} ({len(done)} trials with a value)", height=360,
                              margin={"l": 70, "r": 70, "t": 80, "b": 30})}


def sweep_history_figure(doc: dict, metric: str, mode: str) -> dict | None:
    """The objective by trial number, with the best so far (None: no trial has a value yet)."""
    done = sorted((t for t in doc["trials"] if t["value"] is not None), key=lambda t: t["number"])
    if not done:
        return None
    better = max if mode == "max" else min
    best: list[float] = []
    for t in done:
        best.append(better(best[-1], t["value"]) if best else t["value"])
    numbers = [t["number"] for t in done]
    return {"data": [
        {"type": "scatter", "mode": "markers", "name": metric, "x": numbers, "y": [t["value"] for t in done],
         "marker": {"color": COLORS["on_demand"], "size": 8}},
        {"type": "scatter", "mode": "lines", "name": "best so far", "x": numbers, "y": best,
         "line": {"color": COLORS["spot"], "shape": "hv"}},
    ], "layout": _layout("Optimization history", xaxis={"title": {"text": "trial"}, "dtick": 1},
                         yaxis={"title": {"text": metric}})}
