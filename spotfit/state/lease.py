"""The lease that makes one controller, and only one, drive a job.

A job row names its lease holder (`lease_owner`: host, pid and a per-process token) and when
the lease runs out (`lease_expires_at`, on the state DB's clock). A controller claims the lease
under a row lock, renews it on every pass (the heartbeat), and stops driving the job as soon as
a renewal finds that another holder has it. A holder that dies stops renewing: once its lease
has expired any controller may take the job over, on any host. On the holder's own host a dead
pid frees the lease at once, so `spotfit resume` right after a crash needs no wait.

`SPOTFIT_LEASE_TTL_S` sets the lease's length (default 15 s); `SPOTFIT_CONTROLLER_HOST` the
host name a controller records (default the machine's: in Kubernetes, the pod's name).

Example:

>>> me = Holder("node-a", 100, "t1")
>>> Holder.parse(me.key) == me
True
>>> held_by_other(me.key, expires_at=50.0, now=40.0, me=Holder("node-b", 7, "t2"))
True
>>> held_by_other(me.key, expires_at=50.0, now=60.0, me=Holder("node-b", 7, "t2"))  # expired
False
"""

from __future__ import annotations

import os
import secrets
import socket
from dataclasses import dataclass

from spotfit.core.arguments import env_number
from spotfit.errors import SpotfitError

LEASE_TTL_ENV = "SPOTFIT_LEASE_TTL_S"
HOST_ENV = "SPOTFIT_CONTROLLER_HOST"
DEFAULT_TTL_S = 15.0


class LeaseTaken(SpotfitError):
    """Another live controller holds the job's lease: this one may not drive the job."""

    @classmethod
    def of(cls, job_id: str) -> LeaseTaken:
        return cls(f"Job {job_id} already has a live controller.", hint=f"Watch it with `spotfit status {job_id}`.")


class LeaseLost(SpotfitError):
    """Another controller holds the job's lease now: this one must stop driving the job."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: a controller process on a host."""

    host: str
    pid: int
    token: str

    @property
    def key(self) -> str:
        return f"{self.host}/{self.pid}/{self.token}"

    @classmethod
    def parse(cls, key: str) -> Holder:
        host, pid, token = key.rsplit("/", 2)
        return cls(host, int(pid), token)


_TOKEN = secrets.token_hex(4)  # one per process: a later process that reuses the pid is another holder


def this_host() -> str:
    return os.environ.get(HOST_ENV) or socket.gethostname()


def this_process() -> Holder:
    """This process as a lease holder."""
    return Holder(this_host(), os.getpid(), _TOKEN)


def ttl_s() -> float:
    """The lease's length: `SPOTFIT_LEASE_TTL_S`, else 15 s."""
    return env_number(LEASE_TTL_ENV, DEFAULT_TTL_S)


def held_by_other(owner: str | None, expires_at: float | None, now: float, me: Holder) -> bool:
    """Whether a lease recorded as (`owner`, `expires_at`) keeps `me` from taking the job at `now`."""
    if owner is None or owner == me.key or expires_at is None or expires_at <= now:
        return False
    holder = Holder.parse(owner)
    if holder.host == me.host:  # a pid is only meaningful on its own host
        return pid_alive(holder.pid)
    return True


def pid_alive(pid: int) -> bool:
    import psutil

    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
