"""Typed attempt handles: round trips, and the text that state DBs already hold still reads."""

from __future__ import annotations

import json

from spotfit.backends.aws.handle import AwsHandle
from spotfit.backends.local_process import LocalHandle, LocalProcess

# As spotfit stored them when handles were JSON dicts (one process, a group of two, an EC2 attempt).
OLD_LOCAL = '{"pid": 4242, "create_time": 1700000000.25, "log": "/s/logs/attempt-0001.log"}'
OLD_GROUP = json.dumps({"pid": 10, "create_time": 1.5, "log": "/l/a.log", "workers": [
    {"pid": 10, "create_time": 1.5, "log": "/l/a.log"}, {"pid": 11, "create_time": 1.75, "log": "/l/a-w1.log"}]})
OLD_AWS = json.dumps({"region": "us-west-2", "job": "j1", "attempt": 3, "job_url": "s3://b/jobs/j1",
                      "instances": ["i-0a", "i-0b"], "security_group": "sg-1", "placement_group": "spotfit-j1-0003"})


def test_stored_local_handles_still_read_and_are_written_back_unchanged():
    one = LocalHandle.from_json(OLD_LOCAL)
    assert one.processes == (LocalProcess(4242, 1700000000.25, "/s/logs/attempt-0001.log"),)
    assert json.loads(one.to_json()) == json.loads(OLD_LOCAL)
    group = LocalHandle.from_json(OLD_GROUP)
    assert [p.pid for p in group.processes] == [10, 11] and group.chief.log == "/l/a.log"
    assert json.loads(group.to_json()) == json.loads(OLD_GROUP)


def test_stored_aws_handles_still_read_and_are_written_back_unchanged():
    handle = AwsHandle.from_json(OLD_AWS)
    assert handle.instances == ("i-0a", "i-0b") and handle.attempt == 3 and handle.security_group == "sg-1"
    assert json.loads(handle.to_json()) == json.loads(OLD_AWS)


def test_handles_are_frozen_and_hashable():
    handle = AwsHandle.from_json(OLD_AWS)
    assert {handle: 1}[AwsHandle.from_json(OLD_AWS)] == 1  # the backend keys its notice timers by handle
    try:
        handle.instances = ()  # type: ignore[misc]
    except AttributeError:
        pass
    else:
        raise AssertionError("a handle must be immutable")


def test_a_handle_of_a_process_that_is_gone_is_not_alive():
    assert not LocalProcess(pid=2**22 - 1, create_time=1.0).alive()


def test_a_live_attempt_stays_alive_and_signalable_when_the_system_clock_is_stepped(monkeypatch):
    # psutil's create_time is boot time (as the clock tells it now) + ticks since boot: an NTP
    # step moves it, and a handle compared on it looked gone, so its notice was never sent.
    import signal
    import subprocess
    import sys

    import psutil

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        member = LocalProcess.of(child.pid)
        assert member.start_s is not None and member.alive()
        assert LocalHandle.from_json(LocalHandle((member,)).to_json()).processes == (member,)
        stepped = psutil.boot_time() + 5.0
        monkeypatch.setattr("psutil._pslinux.boot_time", lambda: stepped)
        assert abs(psutil.Process(child.pid).create_time() - member.create_time) > 4  # what moved
        assert member.alive()
        legacy = LocalProcess(child.pid, member.create_time)  # no start_s: the old comparison
        assert not legacy.alive()
        member.signal_group(signal.SIGTERM)
        assert child.wait(timeout=60) == -signal.SIGTERM
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
