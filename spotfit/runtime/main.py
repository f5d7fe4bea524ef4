"""`python -m spotfit.runtime JOB_URL ATTEMPT`: run one attempt of a job.

Reads `attempts/<n>/runtime.json` from the job's store prefix, imports TensorFlow, restores
the newest valid checkpoint, runs the user's script with `keras.Model.fit` instrumented,
writes `result.json` and exits with one of the codes in `spotfit.runtime`.
"""

from __future__ import annotations

import os
import runpy
import sys
import time
import traceback

from spotfit.runtime import EXIT_DONE, EXIT_PREEMPTED
from spotfit.runtime.config import RuntimeConfig
from spotfit.runtime.preemption import Preempted
from spotfit.runtime.session import Session
from spotfit.stores import open_store


def _process_age_s() -> float:
    import psutil

    return time.time() - psutil.Process().create_time()


def run(job_url: str, attempt: int) -> int:
    config = RuntimeConfig.from_json(
        open_store(job_url).read_bytes(f"attempts/{attempt:04d}/runtime.json").decode()
    )
    session = Session(config)
    rep = session.reporter
    rep.timing("process_start_s", _process_age_s())
    session.watcher.install()
    try:
        t0 = time.perf_counter()
        os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
        import keras
        import tensorflow as tf

        rep.timing("tf_import_s", time.perf_counter() - t0)
        keras.utils.set_random_seed(config.seed)
        if config.deterministic:
            tf.config.experimental.enable_op_determinism()
        session.load_checkpoint()
        from spotfit.runtime import instrument

        instrument.install(session)
        rep.progress(force=True, phase="running script")
        code = _run_script(config)
        if code != EXIT_DONE:
            return code
        result = {"step": None, "weights_sha256": None, "metrics": session.last_metrics}
        if session.model is not None:
            result["weights_sha256"] = instrument.weights_sha256(session.model)
            result["step"] = int(keras.ops.convert_to_numpy(session.model.optimizer.iterations))
        session.write_result(result)
        rep.progress(force=True, phase="done")
        rep.event("done", f"script finished at step {result['step']}", **result)
        return EXIT_DONE
    except Exception as exc:
        rep.event("failed", f"{type(exc).__name__}: {exc}", error=type(exc).__name__)
        raise
    except Preempted as exc:
        rep.event("exit", f"stopped with checkpoint (exit {exc.code}), notice from {session.watcher.source}",
                  code=exc.code)
        return int(exc.code)
    finally:
        session.watcher.close()


def _run_script(config: RuntimeConfig) -> int:
    """Run the user's script as `__main__`; returns its exit status."""
    os.chdir(config.workdir)
    sys.argv = [config.script, *config.args]
    sys.path.insert(0, os.path.dirname(config.script))
    try:
        runpy.run_path(config.script, run_name="__main__")
    except Preempted:
        raise
    except SystemExit as exc:
        if exc.code in (None, 0):
            return EXIT_DONE
        return exc.code if isinstance(exc.code, int) else 1
    return EXIT_DONE


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or not argv[1].isdigit():
        sys.stderr.write("usage: python -m spotfit.runtime JOB_URL ATTEMPT\n")
        sys.exit(2)
    try:
        code = run(argv[0], int(argv[1]))
    except Preempted as exc:  # SIGTERM before training started: nothing new to save
        code = int(exc.code or EXIT_PREEMPTED)
    except BaseException:
        traceback.print_exc()
        sys.stderr.flush()
        code = 1
    _record_exit(argv[0], int(argv[1]), code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _record_exit(job_url: str, attempt: int, code: int) -> None:
    """Leave the exit code in the store: a controller that adopted this attempt reads it."""
    import json

    try:
        open_store(job_url).write_bytes(
            f"attempts/{attempt:04d}/exit.json", json.dumps({"code": code, "at": time.time()}).encode()
        )
    except Exception as exc:  # the code still reaches a parent through the exit status
        sys.stderr.write(f"spotfit: could not record the exit code: {exc}\n")
