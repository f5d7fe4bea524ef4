"""The processes of a local attempt: which they are, whether they live, how to signal them.

A pid alone does not name a process, because pids are reused: a `LocalProcess` is a pid plus
the process's start time (psutil's `create_time`), and a signal goes to its process group
only while both still match. A `LocalHandle` is one attempt: its processes, the chief first.

Stored text (the format of the JSON dicts that came before, so older state DBs still read):
one process is `{"pid", "create_time", "log"}`; a group is the chief's fields plus
`"workers": [...]`, every member in worker order.

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

import psutil

RUNTIME_MODULE = "spotfit.runtime"
_SAME_START_S = 0.01  # create_time is read from /proc in clock ticks: equal within this


@dataclass(frozen=True)
class LocalProcess:
    """One worker process of an attempt."""

    pid: int
    create_time: float
    log: str = ""

    def alive(self) -> bool:
        """Whether this very process (not a later one with its pid) still runs."""
        try:
            proc = psutil.Process(self.pid)
            return abs(proc.create_time() - self.create_time) < _SAME_START_S and proc.status() != psutil.STATUS_ZOMBIE
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
        chief = asdict(self.chief)
        if len(self.processes) == 1:
            return json.dumps(chief)
        return json.dumps({**chief, "workers": [asdict(p) for p in self.processes]})

    @classmethod
    def from_json(cls, text: str) -> LocalHandle:
        info = json.loads(text)
        members = info.get("workers") or [info]
        return cls(tuple(LocalProcess(pid=int(m["pid"]), create_time=float(m["create_time"]), log=m.get("log", ""))
                         for m in members))


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
        member = LocalProcess(pid=proc.pid, create_time=proc.info["create_time"])
        if member.alive():
            found[_worker_index(proc)] = member
    return found


def _worker_index(proc: psutil.Process) -> int:
    try:
        config = proc.environ().get("TF_CONFIG")
    except (psutil.AccessDenied, psutil.NoSuchProcess):
        return 0
    return int(json.loads(config)["task"]["index"]) if config else 0
