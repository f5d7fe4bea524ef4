"""Pages that change by themselves in a real browser, over a seeded home (no job runs): a sweep's
page follows its trials as the sweep store records them; a job's page shows at once and its
hindsight figures (the replay of every policy on the job's window) arrive afterwards.

Debian's chromium, headless, driven by Playwright, on 127.0.0.1 (tests/ui/browser.py). The
changes are written through the sweep store's own API, as the sweep controller writes them;
the test then waits on the page's DOM (every wait has a deadline), never on time.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.sweep.store import SweepDB
from tests.support.statedb import seed_jobs
from tests.support.wait import wait_for
from tests.ui.browser import launch, serve, wait_in_page

pytestmark = [pytest.mark.slow, pytest.mark.browser]

TOKEN = "browser-live-token-51c0"
SWEEP = "seeded-sweep-live01"
PAGE_TIMEOUT_MS = 60_000


@pytest.fixture(scope="module")
def home(tmp_path_factory) -> Path:
    """A home with three seeded jobs and a running sweep of three trials: one completed, two running."""
    home = tmp_path_factory.mktemp("ui-live-home")
    ids = seed_jobs(home / "state.db", 3)
    sweeps = SweepDB(home / "sweeps.db")
    sweeps.create_sweep(SWEEP, "seeded", json.dumps({"objective": {"metric": "val_accuracy", "mode": "max"}}))
    for number, job_id in enumerate(ids):
        sweeps.add_trial(SWEEP, number, {"lr": 10.0 ** -(number + 1)})
        sweeps.update_trial(SWEEP, number, job_id=job_id, state="completed" if number == 0 else "running",
                            value=0.9 if number == 0 else None)
    return home


@pytest.fixture(scope="module")
def url(home) -> Iterator[str]:
    with serve({**os.environ, "SPOTFIT_HOME": str(home), "SPOTFIT_UI_TOKEN": TOKEN}) as served:
        yield served


@pytest.fixture
def page(url) -> Iterator:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = launch(pw)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        context.set_default_timeout(PAGE_TIMEOUT_MS)
        opened = context.new_page()
        opened.goto(url)  # the token sets the cookie
        yield opened
        browser.close()


def test_the_sweep_page_shows_a_trials_new_state_and_value_without_a_reload(page, url, home):
    from playwright.sync_api import expect

    page.goto(f"{url.split('?')[0]}sweeps/{SWEEP}")
    page.evaluate("window.sameDocument = true")
    trial = page.locator('#trials tr[data-trial="1"]')
    expect(trial).to_have_attribute("data-state", "running")
    expect(page.locator("#history")).to_be_visible()  # trial 0 has a value
    assert page.evaluate("document.getElementById('history').data[0].y") == [0.9]

    SweepDB(home / "sweeps.db").update_trial(SWEEP, 1, state="completed", value=0.95)

    expect(trial).to_have_attribute("data-state", "completed", timeout=PAGE_TIMEOUT_MS)
    expect(trial.locator(".value")).to_have_text("0.95")
    expect(page.locator("#sweep-summary")).to_contain_text("best: trial 1, 0.95")
    wait_in_page(page, "JSON.stringify(document.getElementById('history').data[0].y) === '[0.9,0.95]'")
    assert page.evaluate("window.sameDocument") is True  # updated in place, not by a reload


def test_a_jobs_page_shows_before_its_policy_figures_arrive_and_then_shows_them(page, url, home, monkeypatch):
    from playwright.sync_api import expect

    job_id = "seeded-00002"
    held: list = []
    page.route("**/hindsight", lambda route: held.append(route))  # answered when the test lets it through
    with page.expect_request("**/hindsight"):
        page.goto(f"{url.split('?')[0]}jobs/{job_id}")
    wait_for(lambda: page.evaluate("true") and held, 60, "the page's request for the hindsight figures to be held")

    # Drawn and filled while the answer is held: the charts, the ledger's rows, a "computing" mark.
    wait_in_page(page, "['timeline', 'cost', 'progress'].every(id => document.getElementById(id).data)")
    expect(page.locator("#ledger tbody tr")).to_have_count(3)  # the seeded job's three attempts
    expect(page.locator("#ledger tr.pending")).to_be_visible()
    expect(page.locator("#ledger tr.policy")).to_have_count(0)
    expect(page.locator("#summary")).to_contain_text("computing…")

    held[0].continue_()
    monkeypatch.setenv("SPOTFIT_HOME", str(home))
    totals = sdk.cost(job_id)["totals"]
    expect(page.locator("#ledger tr.policy")).to_have_count(len(totals["policies"]), timeout=PAGE_TIMEOUT_MS)
    expect(page.locator("#optimum")).to_have_text(f"${totals['optimum_usd']:,.4f}")
    expect(page.locator("#regret")).to_have_text(f"×{totals['regret']:.3f}")
    for name, usd in totals["policies"].items():
        expect(page.locator(f'#ledger tr[data-policy="{name}"] td')).to_have_text(f"${usd:,.4f}")
    expect(page.locator("#ledger tr.pending")).to_have_count(0)
