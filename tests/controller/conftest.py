"""Fixtures of the controller tests: the processes they start, the webhook their rules notify."""

from __future__ import annotations

import os
import signal

import psutil
import pytest

from tests.support.webhook import webhook_receiver


@pytest.fixture
def processes():
    """Controllers the test started, and the runtimes they started: those still running are killed at the end."""
    started: list[psutil.Process] = []
    yield started
    for proc in started:
        if proc.is_running():  # the same process (pid and start time), not a later one with its pid
            os.killpg(proc.pid, signal.SIGKILL)  # each leads its own process group


@pytest.fixture
def webhook():
    """A webhook receiver on 127.0.0.1: (url, list of received payloads)."""
    with webhook_receiver() as hook:
        yield hook
