"""`python -m spotfit.runtime JOB_URL ATTEMPT`: run one attempt of a job.

Reads `attempts/<n>/runtime.json` from the job's store prefix, imports TensorFlow, restores
the newest valid checkpoint, runs the user's script with `keras.Model.fit` instrumented,
writes `result.json` and exits with one of the codes in `spotfit.attempt.exit_codes`.

It ends as `python train.py` would after the script's last line: it waits for the script's
non-daemon threads and runs the `atexit` handlers (the script's, and TensorFlow's: autograph
deletes its generated files there, an async checkpoint joins its save), then leaves with
`os._exit`, skipping only the interpreter's teardown (about a second of garbage collection over
TensorFlow's objects). After a preemption notice or a stop, the threads are not waited for: the
cloud would have ended the process; the handlers still run. Both are cut short after
`SPOTFIT_END_GRACE_S` seconds (300 by default), so that a thread that never ends cannot keep a
finished attempt, and its bill, running.
"""

from __future__ import annotations

import atexit
import gc
import os
import runpy
import sys
import threading
import time
import traceback
from collections.abc import Callable

from spotfit.attempt import layout
from spotfit.attempt.config import RuntimeConfig
from spotfit.attempt.exit_codes import EXIT_CONFIG, EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED, EXIT_STORE, RESERVED
from spotfit.attempt.progress import Phase
from spotfit.attempt.result import Result, encode_exit
from spotfit.core.arguments import env_number
from spotfit.errors import NotFoundError, StoreError, UsageError
from spotfit.runtime.fit_calls import FitCalls
from spotfit.runtime.job_data import sync_job_data
from spotfit.runtime.preemption import Preempted
from spotfit.runtime.session import Session
from spotfit.runtime.utilization import start_sampling
from spotfit.stores import open_store

END_GRACE_S = 300.0  # the longest the script's threads and exit handlers may run after its end


def _process_age_s() -> float:
    import psutil

    return time.time() - psutil.Process().create_time()


Trainer = Callable[[Session], "int | Result"]


def run(job_url: str, attempt: int, trainer: Trainer | None = None) -> int:
    """Run attempt `attempt` of the job at `job_url`; its exit code.

    `trainer` trains and returns the job's result, or the script's own non-zero exit code; the
    default runs the user's script under TensorFlow (`train_script`). The hollow runtime
    (spotfit/hollow/) passes its own: all else, the attempt's contract, is this function's.
    """
    config = RuntimeConfig.from_json(
        open_store(job_url).read_bytes(layout.runtime_config(attempt)).decode()
    )
    if config.kind == "notebook":  # JupyterLab instead of a script: no TensorFlow here
        from spotfit.runtime import notebook

        return notebook.serve(config)
    session = Session(config)
    rep = session.reporter
    rep.timing("process_start_s", _process_age_s())
    session.watcher.install()  # from here a notice ends the attempt "preempted", even one with nothing to train
    if (done := session.finished_result()) is not None:
        return _already_done(session, done)
    stop_sampling = start_sampling(rep.state, no_gpu=lambda why: _no_gpu(rep, why), sampled=rep.news)
    stop_heartbeat = rep.start_heartbeat()
    stop_polling = session.start_stop_polling()
    try:
        outcome = (trainer or train_script)(session)
        if isinstance(outcome, int):
            return outcome
        result = outcome
        session.write_result(result)
        if result["step"] is not None:  # every fit call is known now: the total is exact
            rep.progress(total_steps=result["step"], total_steps_estimated=False)
        rep.progress(force=True, phase=Phase.DONE)
        rep.event("done", f"script finished at step {result['step']}",
                  **{k: v for k, v in result.items() if k not in ("attempt", "offers")})
        session.stop.barrier("done")
        return EXIT_DONE
    except Exception as exc:
        # `error_line` and `step`: the controller does not retry a failure two attempts share.
        rep.event("failed", f"{type(exc).__name__}: {exc}", error=type(exc).__name__,
                  hint=getattr(exc, "hint", None), error_line=_error_line(exc), step=rep.state["step"])
        raise
    except Preempted as exc:
        # The checkpoint events say whether the last save was written (it is not when it failed
        # or the weights were NaN).
        rep.event("exit", f"stopped at step {rep.state['step']} (exit {exc.code}), notice from "
                  f"{session.stop.reason or session.watcher.source}", code=exc.code)
        if (exc.code == EXIT_STOPPED and (session.stop_request or {}).get("export") and config.export
                and session.is_chief and session.model is not None):
            _export(session, _held_target(session))
        session.stop.barrier("stopped")  # the chief's checkpoint is written before anyone exits
        return int(exc.code or EXIT_PREEMPTED)
    finally:
        stop_sampling.set()
        stop_heartbeat.set()
        stop_polling.set()
        session.watcher.close()


def train_script(session: Session) -> int | Result:
    """Import TensorFlow, restore, run the user's script with `fit` instrumented: its result, or its exit code."""
    config, rep = session.config, session.reporter
    t0 = time.perf_counter()
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    keras_2 = config.keras == "2"
    if keras_2:  # before TensorFlow is imported: the script's `tf.keras` is then Keras 2 (runtime/keras2/)
        os.environ["TF_USE_LEGACY_KERAS"] = "1"
    import tensorflow as tf

    if keras_2:
        from spotfit.runtime.keras2.internals import tf_keras as keras  # checked: one line when it is missing
    else:
        import keras  # type: ignore[no-redef]
    rep.timing("tf_import_s", time.perf_counter() - t0)
    strategy = _keras2_speedups(session) if keras_2 else _speedups(session)  # before any other TF op
    keras.utils.set_random_seed(config.seed)
    if config.deterministic:
        tf.config.experimental.enable_op_determinism()
    session.load_checkpoint()
    from spotfit.runtime import apply_hook, model_state

    if keras_2:  # nothing of Keras 3 is imported in a Keras 2 attempt (tests/runtime/test_keras2_resume.py)
        from spotfit.runtime.keras2 import fit as keras2_fit

        keras2_fit.install(session)
    else:
        from spotfit.runtime import fit_wrapper

        fit_wrapper.install(session)
    sync_job_data(config, rep)  # sets SPOTFIT_DATA_DIR for the script
    rep.progress(force=True, phase=Phase.RUNNING_SCRIPT)
    code = _run_with_fallback(session, strategy)
    if code != EXIT_DONE:
        return code
    apply_hook.finish()  # an unmodified custom loop ends with the script: its end save
    result: Result = {
        "step": None, "weights_sha256": None, "metrics": session.last_metrics, "attempt": config.attempt,
        "offers": session.offer.offers if session.offer is not None else session.offers}
    if session.model is not None:
        result["weights_sha256"] = model_state.weights_sha256(session.model)
        # Steps trained, as counted by the callback: Keras's `optimizer.iterations` also counts
        # the empty call that ends an epoch on a dataset of unknown size.
        result["step"] = rep.state["step"]
        if config.export and session.is_chief:
            result["export"] = _export(session, result)
    return result


def _keras2_speedups(session: Session):
    """On Keras 2 the script's own dtype policy and `jit_compile` run: spotfit measures and applies none,
    and writes no TensorBoard log of its own. The strategy is the attempt's, as on Keras 3 (a
    `tf.distribute` strategy: Keras 2's `fit` runs under `MultiWorkerMirroredStrategy` as it is)."""
    session.reporter.event(
        "keras", "Keras 2 (tf-keras): the script's own dtype policy and jit_compile; spotfit measures and applies "
        "speed-ups, and writes its TensorBoard log, on Keras 3 only", version="2")
    strategy, _ = _strategy(session)
    return strategy


def _no_gpu(rep, why: str) -> None:
    """Say once, as an event and a log line, that there is no GPU to sample (rather than write zeros)."""
    rep.event("no_gpu", f"no GPU ({why}): GPU utilization and memory are not sampled", reason=why)
    sys.stderr.write(f"spotfit: no GPU ({why}): GPU utilization and memory are not sampled\n")


def _already_done(session: Session, done: Result) -> int:
    """The job's training ended in an earlier attempt: train nothing, write no result, exit done.

    It happens on the replay, where this machine may train faster than the modeled instance:
    the attempt that trained the last step can end, in the model, at a tick before it (its spot
    capacity gone, or the policy switching), and the modeled rest of the work is this attempt's.
    It reports the last step as trained, so the controller's clock bills that rest (the
    modeled instance's time), then ends; the result stays the one its trainer wrote.
    """
    rep, step = session.reporter, done.get("step")
    rep.progress(force=True, phase=Phase.TRAINING, step=step or 0, total_steps=step, total_steps_estimated=False)
    rep.event("already_done", f"training ended at step {step} in attempt {done.get('attempt')}: "
              "nothing left to train, the result is kept", step=step, by_attempt=done.get("attempt"))
    rep.progress(force=True, phase=Phase.DONE)
    return EXIT_DONE


def _error_line(exc: BaseException) -> str:
    """The traceback's last line (`module.Type: message`), on one line of at most 300 characters."""
    return " ".join("".join(traceback.format_exception_only(type(exc), exc)).split())[:300]


def _held_target(session: Session) -> dict:
    """Step, weights and metrics of the epoch end at which the target held (the stop's `at_step`).

    The rule fired on that epoch's metrics; training went on until the stop request was read.
    Without a matching epoch end the model is exported as it stopped.
    """
    from spotfit.runtime import model_state

    model = session.model
    assert model is not None, "an export needs the model that trained"
    at_step = (session.stop_request or {}).get("at_step")
    step = session.reporter.state["step"]
    for end_step, metrics, weights in [*session.target_ends, *session.epoch_ends]:
        if end_step == at_step:
            model.set_weights(weights)
            step, session.last_metrics = end_step, metrics
    return {"step": step, "weights_sha256": model_state.weights_sha256(model), "metrics": session.last_metrics}


def _speedups(session: Session):
    """Strategy, precision policy, XLA tuner and TensorBoard log of this attempt; returns the strategy."""
    from spotfit.runtime.tensorboard import TensorBoardLog

    config = session.config
    strategy, gpus = _strategy(session)
    _precision_and_xla(session, strategy is not None, bool(gpus))
    if config.tensorboard and session.is_chief:
        session.tensorboard = TensorBoardLog(session.store, config.histogram_freq, config.tensorboard_update_freq)
    return strategy


def _strategy(session: Session):
    """The attempt's `tf.distribute` strategy (None: the default) and the GPUs this machine has."""
    import tensorflow as tf

    from spotfit.runtime import strategy as dist

    config, rep, cluster = session.config, session.reporter, session.cluster
    logical_cpus = int(env_number(dist.LOGICAL_CPUS_ENV, 0, low_open=False, what="a count of CPUs", unit=""))
    if logical_cpus > 1:
        dist.split_cpu(logical_cpus)
    gpus = len(tf.config.list_physical_devices("GPU"))
    name = dist.choose(config.strategy, max(config.workers, cluster.workers), gpus or max(logical_cpus, 1))
    if cluster.multi and name != "multi_worker":
        raise ValueError(f"Invalid `training.strategy`: received {config.strategy!r} with {cluster.workers} "
                         "workers, expected `multi_worker` or `auto` (each worker would train alone).")
    strategy = dist.create(name, keras_3=config.keras != "2")
    session.strategy_name = name
    if strategy is not None:
        from spotfit.runtime.adopt import adopt

        adopt(strategy, rep)  # a script's own MirroredStrategy(): the attempt's, not a second one
    replicas = strategy.num_replicas_in_sync if strategy is not None else 1
    os.environ["SPOTFIT_NUM_REPLICAS"] = str(replicas)
    os.environ["SPOTFIT_WORKER_INDEX"] = str(cluster.index)
    if cluster.multi:
        session.stop = dist.StopAgreement(cluster, config.attempt)
    rep.event("strategy", f"strategy {name}: {replicas} replica(s) in sync on {cluster.workers} worker(s)",
              strategy=name, replicas=replicas, workers=cluster.workers, worker=cluster.index)
    return strategy, gpus


def _precision_and_xla(session: Session, distributed: bool, has_gpu: bool) -> None:
    """The dtype policy and XLA of this attempt: the script's own unless the spec asks (choices.py)."""
    from spotfit.runtime import offer, precision, xla
    from spotfit.runtime.choices import ScriptChoices

    config, rep = session.config, session.reporter
    policy, why = precision.choose(config.mixed_precision, precision.detect())
    auto = config.mixed_precision == "auto"

    def script_policy_kept(name: str) -> None:
        if auto and session.precision is not None:
            session.precision = None
            rep.event("precision", f"dtype policy {name}: set by the script, kept", policy=name, reason="script")

    session.choices = ScriptChoices(rep, None if auto else config.mixed_precision, script_policy_kept)
    session.choices.install()
    if auto and not config.auto_apply:
        rep.event("precision", "dtype policy: the script's own; auto measures and offers, "
                  "`training.auto_apply: true` applies", policy=None, reason="script")
    else:
        saved = precision.load_tuning(session.store) if auto else None
        if saved is not None:
            policy = saved["policy"]
            rep.event("precision", f"dtype policy {'float32' if policy == 'off' else policy}: measured by an "
                      "earlier attempt", reused=True,
                      **{k: saved.get(k) for k in ("policy", "off_step_s", "candidate_step_s")})
        elif auto and policy != "off" and not config.deterministic and not distributed:
            session.precision = precision.PrecisionTuner(policy, why, session.store, rep)  # its event says the choice
        else:
            rep.event("precision", f"dtype policy {'float32' if policy == 'off' else policy}: {why}",
                      policy=policy, reason=why)
        precision.apply(policy)
        session.choices.applied_policy = None if policy == "off" else policy

    if config.xla == "auto" and not config.auto_apply:
        session.xla = None  # the script's own jit_compile
    else:
        fixed, why = xla.without_measuring(has_gpu, config.deterministic, distributed)
        session.xla = xla.XlaTuner(config.xla, session.store, rep, fixed, why, after=session.precision)
    offer_policy = policy if auto and not config.auto_apply and policy != "off" else None
    offer_xla = config.xla == "auto" and not config.auto_apply
    if distributed and (offer_policy or offer_xla):
        rep.event("offer", "no speed-up offered: not measured under a distribution strategy", offers=[])
    elif offer_policy or offer_xla:
        saved_offer = offer.load(session.store)
        if saved_offer is not None:
            offer.report(saved_offer, rep, reused=True)
            session.offers = offer.faster(saved_offer)
        else:
            session.offer = offer.OfferTrial(offer_policy, offer_xla, session.store, rep)


def _export(session: Session, result: Result) -> dict:
    """Export, verify and publish the trained model; failures are reported, not raised."""
    import keras
    import tensorflow as tf

    from spotfit.runtime import export

    config, opts = session.config, session.config.export
    assert opts is not None, "exports happen only for jobs with an export section"
    trace_h = (time.time() - session.t_started) * (opts.get("time_scale") or 1.0) / 3600.0
    this_attempt = (opts.get("price_usd_per_h") or 0.0) * trace_h
    card = {
        "job_id": config.job_id, "attempt": config.attempt, "spec_hash": opts.get("spec_hash"),
        "step": result.get("step"), "weights_sha256": result.get("weights_sha256"),
        "metrics": session.last_metrics,
        "cost": {"usd": round(opts.get("cost_usd_before", 0.0) + this_attempt, 6),
                 "previous_attempts_usd": opts.get("cost_usd_before", 0.0),
                 "this_attempt_usd_estimated": round(this_attempt, 6),
                 "price_usd_per_h": opts.get("price_usd_per_h")},
        "data_source": {**export.script_source(config.script, config.args), "fit_inputs": session.fit_inputs},
        "training": {"dtype_policy": keras.mixed_precision.global_policy().name,
                     "strategy": session.strategy_name,
                     "replicas": int(env_number("SPOTFIT_NUM_REPLICAS", 1, low=1, low_open=False, what="a count",
                                                 unit="")),
                     "xla": None if session.xla is None else session.xla.choice},
        "versions": {"tensorflow": tf.__version__, "keras": keras.__version__},
    }
    try:
        card = export.export(session.model, opts, card, session.sample_x)
    except Exception as exc:  # noqa: BLE001 — the model was trained and checkpointed: report, do not fail the job
        session.reporter.event("export_failed", f"export not published: {type(exc).__name__}: {exc}",
                               error=str(exc)[:500])
        return {"error": f"{type(exc).__name__}: {exc}"}
    session.reporter.event("exported", f"published {opts['name']} version {card['version']} to {card['url']}",
                           version=card["version"], url=card["url"], formats=sorted(card["formats"]))
    return {"version": card["version"], "url": card["url"]}


def _run_with_fallback(session: Session, strategy) -> int:
    """Run the script; when a dtype policy spotfit applied breaks it before its first step, run it
    again in place under the script's own policy (choices.py), instead of failing the attempt."""
    config, rep = session.config, session.reporter
    resume_checkpoint = session.resume_checkpoint
    try:
        return _run_script(config, strategy)
    except Exception as exc:
        choices = session.choices
        if choices is None or not choices.fallback_allowed(exc, session.stepped, session.cluster.multi):
            raise
        applied = choices.fall_back()
        import keras  # a policy spotfit applied: Keras 3's (on Keras 2 there is none, and no fallback)

        from spotfit.runtime import precision

        rep.event("speedup_fallback", f"dtype policy {applied} made the script fail before its first step "
                  f"({type(exc).__name__}: {precision.error_line(exc)}); running it again with "
                  "its own policy", setting="mixed_precision", applied=applied, error=type(exc).__name__)
    session.precision = None
    session.resume_checkpoint = resume_checkpoint
    session.calls = FitCalls(session.store, resume_checkpoint)
    session.model, session.fit_inputs, session.sample_x = None, [], None
    keras.utils.set_random_seed(config.seed)
    return _run_script(config, strategy)


def _run_script(config: RuntimeConfig, strategy=None) -> int:
    """Run the user's script as `__main__` (inside the strategy's scope); returns its exit status."""
    import contextlib

    os.chdir(config.workdir)
    sys.argv = [config.script, *config.args]
    sys.path.insert(0, os.path.dirname(config.script))
    scope = strategy.scope() if strategy is not None else contextlib.nullcontext()
    # The runtime's ~300,000 imported objects live as long as the process: frozen, a full GC collection in the
    # script scans only the script's objects (0.17-0.20 s of a small model's first epoch; docs/benchmarks.md).
    gc.freeze()
    try:
        with scope:
            runpy.run_path(config.script, run_name="__main__")
    except Preempted:
        raise
    except Exception:
        from spotfit.runtime import apply_hook

        code = apply_hook.stop_code()  # a stop inside a tf.function step reaches the script as a TF error
        if code is None:
            raise
        raise Preempted(code) from None
    except SystemExit as exc:
        if exc.code in (None, 0):
            return EXIT_DONE
        code = exc.code if isinstance(exc.code, int) else 1
        if code in RESERVED:  # the runtime's own codes: a preemption, a stop, a store failure
            sys.stderr.write(f"spotfit: the script exited {code}, a code spotfit's runtime keeps for itself "
                             f"(preempted, stopped, store failure); the attempt records exit 1\n")
            return 1
        return code
    return EXIT_DONE


def main(argv: list[str] | None = None, trainer: Trainer | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or not argv[1].isdigit():
        sys.stderr.write("usage: python -m spotfit.runtime JOB_URL ATTEMPT\n")
        sys.exit(2)
    try:
        code = run(argv[0], int(argv[1]), trainer)
    except Preempted as exc:  # SIGTERM before training started: nothing new to save
        code = int(exc.code or EXIT_PREEMPTED)
    except UsageError as exc:  # the job's configuration: retrying cannot mend it (a missing object may)
        traceback.print_exc()
        code = 1 if isinstance(exc, NotFoundError) else EXIT_CONFIG
    except StoreError:  # the store failed where the attempt cannot go on without it: not the script's fault
        traceback.print_exc()
        sys.stderr.flush()
        code = EXIT_STORE
    except BaseException:  # noqa: BLE001 — any end of the script becomes an exit code and a record
        traceback.print_exc()
        sys.stderr.flush()
        code = 1
    from spotfit.runtime.strategy import cluster_from_env

    if cluster_from_env().is_chief:  # the chief's code is the attempt's; recorded while the stores
        _record_exit(argv[0], int(argv[1]), code)  # still work: exit handlers close their clients
    _end_like_python(code)
    _leave(code)


def _end_like_python(code: int) -> None:
    """What the interpreter does at the end of `python train.py` before its teardown: join the
    non-daemon threads (unless a notice or a stop ended the attempt), then run the `atexit`
    handlers. An exception in a handler is printed and the others still run, as in Python.

    Unlike Python, it waits at most `_end_grace_s()`: a thread that never ends would otherwise keep
    a finished attempt's machine, and its bill, running. Then it says so in the attempt's log and leaves."""
    grace = _end_grace_s()

    def cut_short() -> None:
        sys.stderr.write(f"spotfit: the script's threads or exit handlers were still running {grace:g} s "
                         f"after its end; the attempt ends now with exit {code}\n")
        _leave(code)

    timer = threading.Timer(grace, cut_short)
    timer.daemon = True  # not one of the threads it waits for
    timer.start()
    if code not in (EXIT_PREEMPTED, EXIT_STOPPED):
        threading._shutdown()  # type: ignore[attr-defined]  # the join Py_Finalize does first
    atexit._run_exitfuncs()
    timer.cancel()


def _end_grace_s() -> float:
    """`SPOTFIT_END_GRACE_S`, else `END_GRACE_S`. A bad value gets one line in the log and the
    default: the script has already ended, and its exit code must not be lost to a typo."""
    try:
        return env_number("SPOTFIT_END_GRACE_S", END_GRACE_S)
    except UsageError as err:
        sys.stderr.write(f"spotfit: {err.message} Using {END_GRACE_S:g} s (unset it for the default).\n")
        return END_GRACE_S


def _leave(code: int) -> None:
    """Undo a data mount left, and end the process without the interpreter's teardown."""
    mounts = sys.modules.get("spotfit.runtime.datamount")
    if mounts is not None:  # `data.mode: mount`: undone by its atexit handler, or here
        mounts.unmount_all()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _record_exit(job_url: str, attempt: int, code: int) -> None:
    """Leave the exit code in the store: a controller that adopted this attempt reads it."""

    try:
        open_store(job_url).write_bytes(
            layout.exit_record(attempt), encode_exit(code, at=time.time())
        )
    except Exception as exc:  # noqa: BLE001 — the code still reaches a parent through the exit status
        sys.stderr.write(f"spotfit: could not record the exit code: {exc}\n")
