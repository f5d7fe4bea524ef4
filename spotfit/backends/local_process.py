"""The processes of a local attempt: which they are, whether they live, how to signal them.

A pid alone does not name a process, because pids are reused: a `LocalProcess` is a pid plus
the process's start, and a signal goes to its process group only while both still match. The
start is compared as seconds since boot (`start_s`, from /proc/PID/stat), which never changes:
psutil's `create_time` adds the boot time as the system clock tells it now, so it moves when the
clock is stepped (NTP), and a live attempt would look gone and never get its notice. Handles
without `start_s` (older state DBs, systems without /proc) compare `create_time`.
A `LocalHandle` is one attempt: its processes, the chief first.

Stored text (the format of the JSON dicts that came before, so older state DBs still read):
one process is `{"pid", "create_time", "log"}` and, when known, `"start_s"`; a group is the
chief's fields plus `"workers": [...]`, every member in worker order.

>>> handle = LocalHandle((LocalProcess(pid=4242, create_time=1700000000.5, log="/tmp/a.log"),))
>>> handle.to_json()
'{"pid": 4242, "create_time": 1700000000.5, "log": "/tmp/a.log"}'
>>> LocalHandle.from_json(handle.to_json()) == handle
True
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

import psutil

RUNTIME_MODULE = "spotfit.runtime"
_SAME_START_S = 0.01  # create_time is read from /proc in clock ticks: equal within this


@dataclass(frozen=True)
class LocalProcess:
    """One worker process of an attempt."""

    pid: int
    create_time: float
    log: str = ""
    start_s: float | None = None  # seconds from boot to the process's start: immune to clock steps

    @classmethod
    def of(cls, pid: int, log: str = "") -> LocalProcess:
        """The running process `pid`, named by its start."""
        return cls(pid=pid, create_time=psutil.Process(pid).create_time(), log=log, start_s=since_boot_s(pid))

    def alive(self) -> bool:
        """Whether this very process (not a later one with its pid) still runs."""
        try:
            proc = psutil.Process(self.pid)
            start_s = self.start_s
            now = since_boot_s(self.pid) if start_s is not None else None
            if now is not None and start_s is not None:
                same = abs(now - float(start_s)) < _SAME_START_S
            else:
                same = abs(proc.create_time() - self.create_time) < _SAME_START_S
            return same and proc.status() != psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return False

    def signal_group(self, sig: int) -> None:
        """Signal the process group this process leads, only while it is still the one started."""
        if not self.alive():
            return
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass


@dataclass(frozen=True)
class LocalHandle:
    """The processes of one local attempt, the chief (worker 0) first."""

    processes: tuple[LocalProcess, ...]

    @property
    def chief(self) -> LocalProcess:
        return self.processes[0]

    def to_json(self) -> str:
        chief = _fields(self.chief)
        if len(self.processes) == 1:
            return json.dumps(chief)
        return json.dumps({**chief, "workers": [_fields(p) for p in self.processes]})

    @classmethod
    def from_json(cls, text: str) -> LocalHandle:
        info = json.loads(text)
        members = info.get("workers") or [info]
        return cls(tuple(LocalProcess(pid=int(m["pid"]), create_time=float(m["create_time"]), log=m.get("log", ""),
                                      start_s=None if m.get("start_s") is None else float(m["start_s"]))
                         for m in members))


def _fields(process: LocalProcess) -> dict[str, object]:
    """A process as stored: `start_s` only when known (older readers see the fields they knew)."""
    return {k: v for k, v in asdict(process).items() if not (k == "start_s" and v is None)}


def since_boot_s(pid: int) -> float | None:
    """Seconds from boot to the start of process `pid` (/proc/PID/stat's starttime); None when
    there is no such process or no /proc."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()  # after the command name, which may hold spaces
    return int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22: starttime, in clock ticks


def runtime_command(python: str, job_url: str, attempt: int) -> list[str]:
    """The command line of an attempt's runtime process; `find_runtime` recognizes it."""
    return [python, "-m", RUNTIME_MODULE, job_url, str(attempt)]


def find_runtime(job_url: str, attempt: int) -> dict[int, LocalProcess]:
    """The live runtime processes of attempt `attempt` of the job at `job_url`, by worker index.

    They are recognized by their command line (`runtime_command`), whoever started them; the
    worker index comes from the `TF_CONFIG` in their environment (none: worker 0).
    """
    tail = runtime_command("", job_url, attempt)[1:]
    found: dict[int, LocalProcess] = {}
    for proc in psutil.process_iter(["cmdline", "create_time"]):
        cmdline = proc.info["cmdline"] or []
        if cmdline[-len(tail):] != tail or proc.info["create_time"] is None:
            continue
        member = LocalProcess(pid=proc.pid, create_time=proc.info["create_time"], start_s=since_boot_s(proc.pid))
        if member.alive():
            found[_worker_index(proc)] = member
    return found


def _worker_index(proc: psutil.Process) -> int:
    try:
        config = proc.environ().get("TF_CONFIG")
    except (psutil.AccessDenied, psutil.NoSuchProcess):
        return 0
    return int(json.loads(config)["task"]["index"]) if config else 0
