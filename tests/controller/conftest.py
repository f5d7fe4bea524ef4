"""Fixtures of the controller tests that start real controller processes."""

from __future__ import annotations

import os
import signal

import psutil
import pytest


@pytest.fixture
def processes():
    """Controllers the test started, and the runtimes they started: those still running are killed at the end."""
    started: list[psutil.Process] = []
    yield started
    for proc in started:
        if proc.is_running():  # the same process (pid and start time), not a later one with its pid
            os.killpg(proc.pid, signal.SIGKILL)  # each leads its own process group
