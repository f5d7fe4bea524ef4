"""Distribution: which `tf.distribute` strategy an attempt trains under, and how workers agree.

`training.strategy`:

- `none`: TensorFlow's default strategy (one device);
- `mirrored`: `MirroredStrategy` over this machine's GPUs, or over logical CPU devices when
  `SPOTFIT_LOGICAL_CPUS` > 1 (for testing data parallelism without GPUs; the local backend sets it
  to `resources.count` for `accelerator: CPU`);
- `multi_worker`: `MultiWorkerMirroredStrategy` over the workers named in `TF_CONFIG`, which
  the backend builds (the local backend starts one process per worker on 127.0.0.1 ports);
- `auto` (default): `multi_worker` when `resources.workers` > 1, else `mirrored` when this
  machine has several devices, else `none`.

The runtime creates the strategy before the user's script runs and runs the script inside
`strategy.scope()`, so an unmodified script builds its model, optimizer and metrics as
distributed variables. A script that creates its own `MirroredStrategy` or
`MultiWorkerMirroredStrategy` gets this one back (adopt.py).

The script's batch size is the **global** batch: each of the
`num_replicas_in_sync` replicas gets `batch / replicas` examples per step, so a run on two
workers takes the same steps over the same data as a run on one (scale the batch yourself,
e.g. `batch * int(os.environ["SPOTFIT_NUM_REPLICAS"])`, to keep the per-replica batch).

Keras 3 `model.fit` fails under `MultiWorkerMirroredStrategy` (keras-team/keras#20585) for two
reasons, both in `keras/src/backend/tensorflow/trainer.py`; `patch_keras()` fixes them:

1. `_maybe_symbolic_build` reduces the first *data* batch across replicas with
   `strategy.reduce("MEAN", batch, axis=None)` only to learn its shapes. `Strategy.reduce`
   does not accept a nested structure, and for several workers the collective path tries to
   convert the `(x, y)` tuple of `PerReplica` values into one tensor (`ValueError: Attempt to
   convert a value (PerReplica...)`). The fix takes the local replica's batch (shapes and
   dtypes are all the build needs; no collective on data).
2. `reduce_per_replica` averages the per-replica step outputs (loss and metric scalars) across
   workers with `strategy.reduce("MEAN", v, axis=0)`, which fails on scalars ("Invalid
   reduction dimension 0 for input with 0 dimensions"). The fix uses `axis=None` for scalars.

Stopping together (`StopAgreement`): with several workers, a preemption notice reaches one
machine, but synchronous training must stop all of them at the same step or the others wait
forever in the next all-reduce. The worker that gets a notice after step `s` posts the target
`s + 1` in the coordination service's key-value store and waits until every worker has
acknowledged it; the others learn it in a watcher thread. No worker can finish step `s + 1`
before the notified worker has posted (that step's all-reduce needs it), and the notified
worker does not start step `s + 1` before every worker acknowledged, so every worker stops
after the same step; the chief then saves the checkpoint. This is the protocol of
`tf.distribute.experimental.PreemptionCheckpointHandler`, applied to Keras `fit` (that handler
itself targets custom training loops and TensorFlow checkpoints, and probes the GCE metadata
server when constructed).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
from dataclasses import dataclass

from spotfit.attempt.config import LOGICAL_CPUS_ENV as LOGICAL_CPUS_ENV  # read here, set by the local backend

log = logging.getLogger(__name__)

STRATEGIES = ("auto", "none", "mirrored", "multi_worker")
ACK_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Cluster:
    """This process's place among the workers of one attempt (from `TF_CONFIG`)."""

    workers: int = 1
    index: int = 0

    @property
    def is_chief(self) -> bool:
        return self.index == 0

    @property
    def multi(self) -> bool:
        return self.workers > 1


def cluster_from_env(environ: dict | None = None) -> Cluster:
    """The cluster that `TF_CONFIG` describes; one worker when it is absent.

    >>> config = '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}'
    >>> cluster_from_env({"TF_CONFIG": config})
    Cluster(workers=2, index=1)
    """
    text = (os.environ if environ is None else environ).get("TF_CONFIG")
    if not text:
        return Cluster()
    doc = json.loads(text)
    workers = len(doc.get("cluster", {}).get("worker", [])) + len(doc.get("cluster", {}).get("chief", []))
    task = doc.get("task", {})
    index = int(task.get("index", 0)) + (1 if task.get("type") == "worker" and "chief" in doc.get("cluster", {}) else 0)
    return Cluster(workers=max(workers, 1), index=index)


def choose(requested: str, workers: int, devices: int) -> str:
    """The strategy to use: `requested` unless it is `auto` (pure).

    >>> choose("auto", workers=1, devices=1), choose("auto", 1, 4), choose("auto", 2, 1)
    ('none', 'mirrored', 'multi_worker')
    """
    if requested not in STRATEGIES:
        raise ValueError(f"Invalid `training.strategy`: received {requested!r}, expected one of {STRATEGIES}.")
    if requested != "auto":
        return requested
    if workers > 1:
        return "multi_worker"
    return "mirrored" if devices > 1 else "none"


def split_cpu(count: int) -> None:
    """Present the CPU as `count` logical devices (before TensorFlow initializes devices)."""
    import tensorflow as tf

    cpu = tf.config.list_physical_devices("CPU")[0]
    tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * count)


def local_devices() -> list[str]:
    """Devices one machine trains on: its GPUs, else its logical CPUs."""
    import tensorflow as tf

    gpus = tf.config.list_logical_devices("GPU")
    if gpus:
        return [d.name for d in gpus]
    return [d.name for d in tf.config.list_logical_devices("CPU")]


def create(name: str, keras_3: bool = True):
    """A `tf.distribute.Strategy` for `name`, or None for `none` (the default strategy); Keras 3's `fit` is
    patched for it (`patch_keras`) unless the attempt runs on Keras 2 (not `keras_3`), which needs no patch."""
    import tensorflow as tf

    if name == "none":
        return None
    if keras_3:
        patch_keras()
    if name == "mirrored":
        return tf.distribute.MirroredStrategy(devices=local_devices())
    if name == "multi_worker":
        options = tf.distribute.experimental.CommunicationOptions(
            implementation=tf.distribute.experimental.CommunicationImplementation.AUTO)
        strategy = tf.distribute.MultiWorkerMirroredStrategy(communication_options=options)
        # Its coordination agent installs a C-level SIGTERM handler (TF's preemption notifier)
        # that swallows the signal: put back the Python handler (the runtime's NoticeWatcher).
        signal.signal(signal.SIGTERM, signal.getsignal(signal.SIGTERM))
        return strategy
    raise ValueError(f"Invalid strategy {name!r}: expected one of {STRATEGIES}.")


# -- keras-team/keras#20585 -------------------------------------------------------------------

_patched = {"done": False}


def patch_keras() -> None:
    """Make Keras 3 `fit`/`evaluate` work under `MultiWorkerMirroredStrategy` (idempotent)."""
    if _patched["done"]:
        return
    import tensorflow as tf

    from spotfit.runtime.keras_internals import trainer as tf_trainer
    from spotfit.runtime.keras_internals import tree

    original_reduce = tf_trainer.reduce_per_replica

    def local_value(strategy, value):
        if isinstance(value, tf.distribute.DistributedValues):
            return strategy.experimental_local_results(value)[0]
        return value

    def _maybe_symbolic_build(self, iterator=None, data_batch=None):
        if self._distribute_strategy is None:
            return
        strategy = self.distribute_strategy
        if iterator is not None:
            for _, _, it in iterator:
                data_batch = tree.map_structure(lambda v: local_value(strategy, v), next(it))
                break
        with strategy.scope():
            self._symbolic_build(data_batch=data_batch)

    def reduce_per_replica(values, strategy, reduction):
        if reduction in ("auto", "mean") and tf_trainer._collective_all_reduce_multi_worker(strategy):
            def mean(v):
                rank = local_value(strategy, v).shape.rank
                return strategy.reduce("MEAN", v, axis=0 if rank else None)

            return tree.map_structure(mean, values)
        return original_reduce(values, strategy, reduction)

    tf_trainer.TensorFlowTrainer._maybe_symbolic_build = _maybe_symbolic_build
    tf_trainer.reduce_per_replica = reduce_per_replica
    _patched["done"] = True


# -- stopping all workers at the same step ------------------------------------------------------


class StopAgreement:
    """Agree across workers on the global step after which all of them stop.

    One instance per attempt process. `propose(step)` is called by a worker that has a
    notice; `target` is the agreed step (None while nobody proposed). Single-worker attempts
    use `LocalStop`, which needs no coordination service.
    """

    def __init__(self, cluster: Cluster, attempt: int):
        from tensorflow.python.eager import context

        self._context = context.context()
        self.cluster = cluster
        self._key = f"spotfit/attempt-{attempt}/stop-at"
        self.target: int | None = None
        self.reason: str | None = None
        self.code: int | None = None  # the exit code all workers stop with
        self._proposed = False
        threading.Thread(target=self._watch, name="spotfit-stop-watch", daemon=True).start()

    def propose(self, step: int, reason: str, code: int) -> None:
        """Post `step + 1` as the stop step and wait for every worker's acknowledgement."""
        if self._proposed or self.target is not None:
            return
        self._proposed = True
        value = json.dumps({"step": step + 1, "reason": reason, "code": code, "by": self.cluster.index})
        try:
            self._context.set_config_key_value(self._key, value)
        except Exception:  # noqa: BLE001 — another worker posted first: its target is the one
            return
        for i in range(self.cluster.workers):
            try:
                self._context.get_config_key_value(f"{self._key}/ack-{i}", int(ACK_TIMEOUT_S * 1000))
            except Exception as exc:  # noqa: BLE001 — a dead worker: stop anyway, the backend ends the group
                log.warning("worker %d did not acknowledge the stop: %s", i, exc)

    def _watch(self) -> None:
        try:
            doc = json.loads(self._context.get_config_key_value(self._key))
        except Exception:  # noqa: BLE001 — the coordination service went away: the process is ending
            return
        self.reason, self.code = f"{doc['reason']} (worker {doc['by']})", int(doc["code"])
        self.target = int(doc["step"])  # last: the training thread reads it without a lock
        try:
            self._context.set_config_key_value(f"{self._key}/ack-{self.cluster.index}", "1")
        except Exception as exc:  # noqa: BLE001
            log.warning("could not acknowledge the stop: %s", exc)

    def barrier(self, name: str, timeout_s: float = 120.0) -> None:
        """Wait until every worker reaches `name` (before exiting, so the chief's save is done)."""
        try:
            self._context.wait_at_barrier(f"{self._key}/{name}", int(timeout_s * 1000))
        except Exception as exc:  # noqa: BLE001
            log.warning("barrier %s failed: %s", name, exc)


class LocalStop:
    """The single-worker `StopAgreement`: stop after the step at which the notice arrived."""

    def __init__(self):
        self.target: int | None = None
        self.reason: str | None = None
        self.code: int | None = None

    def propose(self, step: int, reason: str, code: int) -> None:
        if self.target is None:
            self.target, self.reason, self.code = step, reason, code

    def barrier(self, name: str, timeout_s: float = 120.0) -> None:
        return None
