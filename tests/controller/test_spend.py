"""Spend across jobs (`spotfit/controller/spend.py`): sums of the per-job ledgers, by label, backend or zone."""

from __future__ import annotations

import json

import pytest

from spotfit.controller.ledger import ledger
from spotfit.controller.spend import spend

OD_PER_H = 3.06


def _attempt(number, zone, market, start_step, end_step, billed_s, usd_per_h, started_at=0.0, state="completed"):
    return {"number": number, "market": market, "zone": zone, "state": state, "start_step": start_step,
            "end_step": end_step, "trace_start_s": 0.0, "trace_end_s": billed_s, "billed_s": billed_s,
            "cost_usd": billed_s / 3600.0 * usd_per_h, "started_at": started_at,
            "info": {"overhead_s": 600.0, "on_demand_usd_per_h": OD_PER_H}}


def _entry(job_id, attempts, labels=None, backend="local", optimum=None, created_at=0.0):
    """(job row, attempts, cost document) with the ledger's own figures; `optimum` as hindsight gives it."""
    doc = ledger(attempts, total_steps=max(a["end_step"] for a in attempts))
    spent = doc["totals"]["spent_usd"]
    doc["totals"].update(optimum_usd=optimum, regret=round(spent / optimum, 3) if optimum else None)
    job = {"id": job_id, "name": job_id, "state": "completed", "created_at": created_at,
           "spec_json": json.dumps({"name": job_id, "labels": labels or {}, "backend": backend})}
    return job, attempts, doc


@pytest.fixture
def entries():
    day = 86_400.0
    return [
        _entry("a", [_attempt(1, "z1", "spot", 0, 40, 4000.0, 1.0), _attempt(2, "z2", "spot", 30, 100, 7000.0, 1.2,
                                                                               started_at=day)],
               labels={"project": "nlp", "owner": "ada"}, optimum=2.5),
        _entry("b", [_attempt(1, "z1", "spot", 0, 50, 5000.0, 0.9)], labels={"project": "vision"}, optimum=1.0),
        _entry("c", [_attempt(1, None, "on_demand", 0, 20, 2600.0, OD_PER_H)], backend="aws"),
    ]


def _sum(entries, key):
    return sum(doc["totals"][key] for _, _, doc in entries if doc["totals"][key] is not None)


def test_groups_by_label_add_up_the_jobs_own_ledgers(entries):
    out = spend(entries, by="project")
    groups = {g["group"]: g for g in out["groups"]}
    assert set(groups) == {"nlp", "vision", "(none)"}
    assert [g["jobs"] for g in out["groups"]] == [1, 1, 1]
    a, b, c = (doc["totals"] for _, _, doc in entries)
    assert groups["nlp"]["spent_usd"] == pytest.approx(a["spent_usd"])
    assert groups["nlp"]["waste_usd"] == pytest.approx(a["waste_usd"]) and a["waste_usd"] > 0  # 10 steps redone
    assert groups["vision"]["on_demand_usd"] == pytest.approx(b["on_demand_usd"])
    t = out["totals"]
    assert t["jobs"] == 3
    assert t["spent_usd"] == pytest.approx(_sum(entries, "spent_usd"))
    assert t["on_demand_usd"] == pytest.approx(_sum(entries, "on_demand_usd"))
    assert t["savings_usd"] == pytest.approx(_sum(entries, "savings_usd"), abs=1e-5)
    assert t["savings_pct"] == round(100 * t["savings_usd"] / t["on_demand_usd"], 1)
    assert t["waste_usd"] == pytest.approx(_sum(entries, "waste_usd"))
    # regret over the jobs with an optimum only (c has none), weighted by their spend
    assert t["regret"] == round((a["spent_usd"] + b["spent_usd"]) / 3.5, 3)
    assert groups["(none)"]["regret"] is None and groups["(none)"]["optimum_usd"] is None


def test_by_backend_and_by_another_label(entries):
    assert {g["group"]: g["jobs"] for g in spend(entries, by="backend")["groups"]} == {"local": 2, "aws": 1}
    assert {g["group"]: g["jobs"] for g in spend(entries, by="owner")["groups"]} == {"ada": 1, "(none)": 2}


def test_by_zone_splits_a_job_over_the_zones_it_ran_in(entries):
    out = spend(entries[:1], by="zone")
    groups = {g["group"]: g for g in out["groups"]}
    rows = entries[0][2]["rows"]
    assert groups["z1"]["spent_usd"] == pytest.approx(rows[0]["cost_usd"])
    assert groups["z2"]["spent_usd"] == pytest.approx(rows[1]["cost_usd"])
    assert groups["z2"]["waste_usd"] == pytest.approx(rows[1]["waste_usd"]) and rows[1]["waste_usd"] > 0
    # steps 0..40 first trained in z1, 40..100 in z2: the on-demand equivalent and optimum split 40:60
    od = entries[0][2]["totals"]["on_demand_usd"]
    assert groups["z1"]["on_demand_usd"] == pytest.approx(0.4 * od, abs=1e-5)
    assert groups["z2"]["on_demand_usd"] == pytest.approx(0.6 * od, abs=1e-5)
    assert groups["z1"]["optimum_usd"] == pytest.approx(1.0)
    assert out["totals"]["spent_usd"] == pytest.approx(entries[0][2]["totals"]["spent_usd"])
    assert out["totals"]["on_demand_usd"] == pytest.approx(od, abs=1e-5)


def test_days_add_up_to_each_groups_spend(entries):
    out = spend(entries, by="project")
    by_group: dict[str, float] = {}
    for d in out["days"]:
        by_group[d["group"]] = by_group.get(d["group"], 0.0) + d["spent_usd"]
    assert by_group == pytest.approx({g["group"]: g["spent_usd"] for g in out["groups"]}, abs=1e-5)
    assert {d["day"] for d in out["days"] if d["group"] == "nlp"} == {"1970-01-01", "1970-01-02"}


def test_no_jobs_gives_empty_groups_and_zero_totals():
    out = spend([], by="project")
    assert out["groups"] == [] and out["days"] == []
    assert out["totals"] == {"jobs": 0, "spent_usd": 0.0, "on_demand_usd": None, "savings_usd": None,
                             "savings_pct": None, "waste_usd": 0.0, "optimum_usd": None, "regret": None}
