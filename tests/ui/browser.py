"""What the browser tests share: `spotfit ui` started on a home of their own, and Debian's chromium.

`serve(env)` starts `spotfit ui --port 0` and yields the URL it prints (with its token);
`launch(playwright)` starts chromium headless, failing loudly where it is not installed;
`wait_in_page(page, expression)` waits for an expression to hold in the page. Playwright's own
`wait_for_function` compiles its predicate in the page with `new Function`, which the dashboard's
CSP (no `unsafe-eval`) refuses, as it should: the tests keep the CSP on and poll `evaluate` instead.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.support.jobs import spotfit_cmd
from tests.support.wait import wait_for

ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def chromium() -> str:
    """Debian's chromium; without it the browser tests fail loudly (they never pass quietly)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.fail("Debian's chromium is not installed: the browser tests need it. Install it with "
                    "`apt-get update && apt-get install -y chromium` (`make test` does).")
    return path


def wait_in_page(page, expression: str, arg=None, timeout: float = 120_000):
    """The truthy value of `expression` (a JS expression, or a function of `arg`) in `page`, polled until
    `timeout` ms; evaluated over DevTools, so the page's CSP allows it. A navigation under way reads as not yet."""
    from playwright.sync_api import Error

    def value():
        try:
            return page.evaluate(expression, arg)
        except Error as err:
            if "context was destroyed" in str(err) or "navigation" in str(err).lower():
                return None
            raise

    return wait_for(value, timeout / 1000, f"the page to show {expression[:120]}", poll_s=0.1)


def launch(playwright):
    return playwright.chromium.launch(executable_path=chromium(), headless=True, args=ARGS)


@contextmanager
def serve(env: dict[str, str]) -> Iterator[str]:
    """`spotfit ui --port 0` with `env` until the block ends; yields its URL with the token."""
    proc = subprocess.Popen(spotfit_cmd("ui", "--port", "0"), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, stdin=subprocess.DEVNULL, env=env)
    assert proc.stdout is not None
    out = proc.stdout
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(out.readline, "")), daemon=True).start()
    try:
        line = wait_for(lambda: next((x for x in lines if "spotfit ui: open" in x), None), 60,
                        "`spotfit ui` to print its URL")
        yield line.split("open ", 1)[1].strip()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
