"""The job's store prefix: every key the controller, the backends and the runtime write or read.

Each key is built here and nowhere else; both sides import it. Who writes what:

| key | writer → reader |
|---|---|
| `spec.json` | `spotfit run` (sdk.submit): the validated spec, as submitted |
| `attempts/<n>/runtime.json` | controller → runtime: `RuntimeConfig` |
| `progress.json` | runtime → controller: the live attempt's step, loss, phase, heartbeat |
| `events/<n>-<seq>.json` | runtime → controller: one event each, read once |
| `result.json`, `attempts/<n>/result.json` | runtime → controller: the job's result, and the attempt's |
| `attempts/<n>/exit.json` | runtime → controller: the exit code, for an adopted attempt |
| `control/stop` | controller → runtime: save and stop (exit 76) |
| `control/probe` | controller: a small write that proves the store has room |
| `checkpoints/<step>/`, `fit_calls/<i>/<step>/` | runtime: its checkpoints; each finished `fit` call's end state |
| `tuning/<name>.json` | runtime: what an attempt measured (precision, xla, offer), reused by the next |
| `tensorboard/` | runtime → `spotfit tensorboard`, the dashboard: the TensorBoard logs |
| `workers/<i>/` | a non-chief worker's own progress, events and result (for debugging) |
| `code/submitted.tar.gz` | `spotfit run --detach` → a shared state's controller: the script's folder |
| `code/<sha256>.tar.gz` | a cloud backend → its worker: the script's folder, named by content |
| `secrets.json` | aws backend → its agent: where the job's secrets are (never their values) |
| `attempts/<n>/launch.json` | a cloud backend → its worker: workdir, shipped code, env, workers |
| `attempts/<n>/cluster.json` | aws backend → its agents: the workers' addresses |
| `attempts/<n>/preempt.json` | aws backend → its agent: forward a SIGTERM to the runtime |
| `logs/attempt-<n>.log`, `logs/attempt-<n>-w<i>.log` | a backend → `spotfit logs`: worker 0's output, worker i's |
| `logs/attempt-<n>.boot.log` | an AWS instance → `spotfit logs`: its boot (user-data, agent) output |
| `notebook/server.json` | a notebook attempt → `spotfit notebook`: where JupyterLab listens |
| `notebook/files/` | `spotfit notebook` ↔ a notebook attempt: its working folder (the seed, then its pushes) |

(`<n>`: the attempt number, four digits.)

>>> runtime_config(3), exit_record(3), event(3, 12)
('attempts/0003/runtime.json', 'attempts/0003/exit.json', 'events/0003-000012.json')
>>> log(3), log(3, worker=1), boot_log(3)
('logs/attempt-0003.log', 'logs/attempt-0003-w1.log', 'logs/attempt-0003.boot.log')
>>> tuning("xla"), fit_call(2), worker_reports(1), code_archive("ab12")
('tuning/xla.json', 'fit_calls/0002', 'workers/1', 'code/ab12.tar.gz')
>>> PROGRESS, RESULT, STOP
('progress.json', 'result.json', 'control/stop')
"""

from __future__ import annotations

SPEC = "spec.json"
PROGRESS = "progress.json"
RESULT = "result.json"
EVENTS = "events"  # the folder of the runtime's events
STOP = "control/stop"
PROBE = "control/probe"
NOTEBOOK_SERVER = "notebook/server.json"
CHECKPOINTS = "checkpoints"  # a folder
FIT_CALLS = "fit_calls"  # a folder
TENSORBOARD = "tensorboard"  # a folder
SUBMITTED_CODE = "code/submitted.tar.gz"
SECRETS = "secrets.json"
NOTEBOOK_FILES = "notebook/files"  # a folder


def attempt_file(attempt: int, name: str) -> str:
    """A file of one attempt: `attempts/<n>/<name>`."""
    return f"attempts/{attempt:04d}/{name}"


def runtime_config(attempt: int) -> str:
    """What the controller tells the attempt (`RuntimeConfig` as JSON)."""
    return attempt_file(attempt, "runtime.json")


def exit_record(attempt: int) -> str:
    """The exit code the attempt's runtime recorded (`{"code", "at"}`)."""
    return attempt_file(attempt, "exit.json")


def attempt_result(attempt: int) -> str:
    """The result of the attempt that trained the last step (the job's `result.json` too)."""
    return attempt_file(attempt, "result.json")


def event(attempt: int, seq: int) -> str:
    """One runtime event: keys sort by attempt, then by the order the runtime wrote them."""
    return f"{EVENTS}/{attempt:04d}-{seq:06d}.json"


def launch_file(attempt: int) -> str:
    """What a cloud worker needs to start the attempt (`backends/attempt_files.py` unpacks it)."""
    return attempt_file(attempt, "launch.json")


def cluster_file(attempt: int) -> str:
    """The attempt's workers' addresses, in launch order (worker 0 is the chief)."""
    return attempt_file(attempt, "cluster.json")


def preempt_file(attempt: int) -> str:
    """The aws backend's request that the instance agent forward a SIGTERM to the runtime."""
    return attempt_file(attempt, "preempt.json")


def log(attempt: int, worker: int = 0) -> str:
    """The attempt's output: worker 0's, or worker `worker`'s beside it."""
    return f"logs/attempt-{attempt:04d}{f'-w{worker}' if worker else ''}.log"


def boot_log(attempt: int) -> str:
    """Where an instance uploads its boot log (user-data and agent output) when it powers off."""
    return f"logs/attempt-{attempt:04d}.boot.log"


def fit_call(index: int) -> str:
    """The folder of the end state of the script's `fit` call `index` (runtime/fit_calls.py)."""
    return f"{FIT_CALLS}/{index:04d}"


def tuning(name: str) -> str:
    """What an attempt measured for a speed-up (`precision`, `xla`, `offer`)."""
    return f"tuning/{name}.json"


def worker_reports(index: int) -> str:
    """The folder where non-chief worker `index` reports (the chief reports at the top)."""
    return f"workers/{index}"


def code_archive(digest: str) -> str:
    """The script's folder shipped to a cloud worker, named by its content."""
    return f"code/{digest}.tar.gz"
