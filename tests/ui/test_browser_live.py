"""Pages that change by themselves in a real browser, over a seeded home (no job runs): a sweep's
page follows its trials as the sweep store records them.

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

from spotfit.sweep.store import SweepDB
from tests.support.statedb import seed_jobs
from tests.ui.browser import launch, serve

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
    page.wait_for_function("JSON.stringify(document.getElementById('history').data[0].y) === '[0.9,0.95]'")
    assert page.evaluate("window.sameDocument") is True  # updated in place, not by a reload
