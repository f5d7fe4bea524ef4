"""`python -m tests.support.suite_run PYTEST_ARGS...`: the suite as `make test` runs it, and what it cost.

It runs `python -m pytest PYTEST_ARGS` as its only child and is the *subreaper* of everything the
suite starts (Linux's `PR_SET_CHILD_SUBREAPER`): a process whose parent ends (a detached controller,
a daemonized PostgreSQL, a runtime whose controller was killed) becomes its child rather than
init's. So it can:

- **count**: the CPU seconds of pytest and of every process it started, reaped here or below
  (`getrusage(RUSAGE_CHILDREN)`: a process's time joins its parent's when it is reaped, and every
  orphan is reaped here); the attempts' runtimes (`python -m spotfit.runtime JOB_URL N`, real or
  hollow, by the `SPOTFIT_HOLLOW` of their environment) and the other processes that loaded
  TensorFlow, seen by a look at /proc every `POLL_S`;
- **end what is left**: when pytest ends, however it ends (its last line, SIGTERM, SIGINT,
  SIGKILL), every process still running below this one gets SIGTERM, then SIGKILL after
  `GRACE_S`: an interrupted suite leaves no server or attempt running. A SIGTERM, SIGINT or SIGHUP
  sent to this process goes on to pytest first.

At the end it prints one line (the figures docs/benchmarks.md quotes) and exits with pytest's code.
"""

from __future__ import annotations

import ctypes
import os
import resource
import signal
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36
POLL_S = 0.25
GRACE_S = 10.0
RUNTIME_MODULE = "spotfit.runtime"
HOLLOW_ENV = b"SPOTFIT_HOLLOW="
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass
class Tally:
    """What the poller saw: runtimes by (job URL, attempt), and the processes that loaded TensorFlow."""

    real: set[tuple[str, str]] = field(default_factory=set)
    hollow: set[tuple[str, str]] = field(default_factory=set)
    runtime_processes: int = 0
    tf_processes: set[tuple[int, str]] = field(default_factory=set)  # (pid, start) of any process with TF mapped
    seen: dict[tuple[int, str], str] = field(default_factory=dict)  # (pid, start) -> "runtime" | "python" | "other"
    # (pid, start) -> (what it is, its own CPU seconds at the last look): only with SPOTFIT_SUITE_PROCS
    cpu: dict[tuple[int, str], tuple[str, float]] = field(default_factory=dict)
    attempt_of: dict[tuple[int, str], tuple[str, str]] = field(default_factory=dict)  # runtime (pid, start) -> attempt


@dataclass(frozen=True)
class Proc:
    """A process as /proc/PID/stat shows it: its parent, its start time (clock ticks) and its own CPU seconds."""

    ppid: int
    start: str
    cpu_s: float


def _stat(pid: str) -> Proc | None:
    """/proc/PID/stat, or None when the process is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return Proc(int(fields[1]), fields[19], (int(fields[11]) + int(fields[12])) / CLOCK_TICKS)


def descendants(root: int) -> dict[int, Proc]:
    """The live processes below `root`, by pid."""
    procs: dict[int, Proc] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (st := _stat(entry)) is not None:
            procs[int(entry)] = st
    children: dict[int, list[int]] = {}
    for pid, proc in procs.items():
        children.setdefault(proc.ppid, []).append(pid)
    out: dict[int, Proc] = {}
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            if pid not in out:
                out[pid] = procs[pid]
                todo.append(pid)
    return out


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return b""


def _has_tensorflow(pid: int) -> bool:
    return b"_pywrap_tensorflow_internal" in _read(f"/proc/{pid}/maps")


def what(words: list[str], hollow: bool) -> str:
    """A process's kind for the CPU tally: the runtime real or hollow, a spotfit command, a script, a server."""
    if RUNTIME_MODULE in words:
        return "runtime hollow" if hollow else "runtime real"
    base = os.path.basename(words[0])
    rest = words[1:]
    if "python" in base:
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest = rest[1:]
        if rest[:1] == ["-m"] and len(rest) > 1:
            base, rest = rest[1], rest[2:]
        elif rest:
            base, rest = os.path.basename(rest[0]), rest[1:]
    if base in ("spotfit", "spotfit.cli"):
        sub = [w for w in rest if not w.startswith("-")][:1]
        return " ".join(["spotfit", *sub])
    if "xdist" in " ".join(words) or base == "pytest" or words[-1:] == ["import sys;exec(eval(sys.stdin.readline()))"]:
        return "pytest"
    return base


def _hollow(pid: int) -> bool:
    return any(v.startswith(HOLLOW_ENV) and v != HOLLOW_ENV for v in _read(f"/proc/{pid}/environ").split(b"\0"))


def poll_once(tally: Tally, root: int, track_cpu: bool = False) -> None:
    for pid, proc in descendants(root).items():
        key = (pid, proc.start)
        kind = tally.seen.get(key)
        if kind is None:
            argv = _read(f"/proc/{pid}/cmdline").split(b"\0")
            words = [a.decode(errors="replace") for a in argv if a]
            if not words:
                continue  # not exec'd yet, or gone: look again next time
            hollow = RUNTIME_MODULE in words and _hollow(pid)
            if RUNTIME_MODULE in words:
                at = words.index(RUNTIME_MODULE)
                attempt = (" ".join(words[at + 1:at + 2]), " ".join(words[at + 2:at + 3]))
                (tally.hollow if hollow else tally.real).add(attempt)
                tally.attempt_of[key] = attempt
                tally.runtime_processes += 1
                kind = "runtime"
            else:
                kind = "python" if "python" in os.path.basename(words[0]) else "other"
            tally.seen[key] = kind
            if track_cpu:
                tally.cpu[key] = (what(words, hollow), 0.0)
        if track_cpu:
            tally.cpu[key] = (tally.cpu[key][0], proc.cpu_s)
        if kind in ("runtime", "python") and key not in tally.tf_processes and _has_tensorflow(pid):
            tally.tf_processes.add(key)


def end_the_rest(root: int, grace_s: float = GRACE_S) -> list[str]:
    """SIGTERM every process still below `root`, SIGKILL what outlives `grace_s`; their command lines."""
    left = descendants(root)
    names = [" ".join(a.decode(errors="replace") for a in _read(f"/proc/{pid}/cmdline").split(b"\0") if a)[:160]
             for pid in left]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid, proc in left.items():
            if (st := _stat(str(pid))) is not None and st.start == proc.start:  # the same process, not a reused pid
                try:
                    os.kill(pid, sig)
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + (grace_s if sig == signal.SIGTERM else 5.0)
        while time.monotonic() < deadline:
            _reap()
            left = descendants(root)
            if not left:
                return names
            time.sleep(0.05)
    return names


def _reap() -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def main(args: list[str]) -> int:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        sys.stderr.write("suite_run: cannot become the subreaper (prctl failed); leftovers are not ended\n")
    root = os.getpid()
    t0 = time.monotonic()
    pytest_pid = os.fork()
    if pytest_pid == 0:
        # Ctrl-C reaches pytest even where this runner was started with SIGINT ignored (a shell's
        # background job, an xdist worker): an ignored signal would stay ignored across exec.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.execv(sys.executable, [sys.executable, "-m", "pytest", *args])

    def forward(signum, frame):
        try:
            os.kill(pytest_pid, signum)
        except ProcessLookupError:
            pass

    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, forward)

    tally = Tally()
    done = threading.Event()

    procs_file = os.environ.get("SPOTFIT_SUITE_PROCS")

    def poll():
        while not done.wait(POLL_S):
            poll_once(tally, root, track_cpu=bool(procs_file))

    threading.Thread(target=poll, name="suite-poll", daemon=True).start()
    code = 1
    while True:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        if pid == pytest_pid:
            code = os.waitstatus_to_exitcode(status)
            break
    left = end_the_rest(root)
    done.set()
    _reap()
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if left:
        sys.stdout.write(f"suite_run: {len(left)} processes outlived pytest and were ended:\n")
        for name in left:
            sys.stdout.write(f"  {name}\n")
    other_tf = sum(1 for key in tally.tf_processes if tally.seen.get(key) != "runtime")
    sys.stdout.write(
        f"suite: {usage.ru_utime + usage.ru_stime:.0f} s of CPU (pytest and every process it started) in "
        f"{time.monotonic() - t0:.0f} s; {len(tally.real)} real TensorFlow attempts, {len(tally.hollow)} hollow "
        f"({tally.runtime_processes} runtime processes); {other_tf} other processes loaded TensorFlow\n")
    sys.stdout.flush()
    if procs_file:
        write_cpu_by_kind(tally, Path(procs_file))
    return code if code >= 0 else 128 - code


def write_cpu_by_kind(tally: Tally, path: Path) -> None:
    """Each kind of process: how many were seen and their CPU at the last look (a process's last
    `POLL_S` and those that lived less than that are missed), most CPU first."""
    sums: dict[str, list[float]] = {}
    for label, cpu in tally.cpu.values():
        entry = sums.setdefault(label, [0, 0.0])
        entry[0] += 1
        entry[1] += cpu
    lines = [f"{cpu:9.1f} s {int(n):6d}  {label}" for label, (n, cpu) in
             sorted(sums.items(), key=lambda kv: -kv[1][1])]
    real: dict[tuple[str, str], float] = {}
    for key, attempt in tally.attempt_of.items():
        if tally.cpu.get(key, ("", 0.0))[0] == "runtime real":
            real[attempt] = real.get(attempt, 0.0) + tally.cpu[key][1]
    lines += ["", "real TensorFlow attempts (job URL, attempt), CPU seconds:"]
    lines += [f"{cpu:9.1f} s  {url} {n}" for (url, n), cpu in sorted(real.items())]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
