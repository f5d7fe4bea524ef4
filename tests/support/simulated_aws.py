"""The aws backend under moto with the instance side simulated: a job driven to its end, no TensorFlow.

SIMULATED: what runs on the instances. moto starts no machine, so `SimulatedInstances` plays
the instance side the way the agent and the runtime would: it writes `progress.json`, events,
`result.json` and `attempts/<n>/exit.json` to the job's store, and ends an instance the way it
ends on EC2 (the runtime exits, the agent powers off, the instance terminates itself). A spot
interruption is played as EC2 plays it: the notice reaches the runtime, which saves at the
current step and exits 75, and the instance is terminated. The controller, the backend and
every EC2 call are the real ones.
"""

from __future__ import annotations

import json
import threading
import time

from spotfit import sdk
from spotfit.controller.loop import Controller
from spotfit.stores import open_store
from tests.support.aws_moto import MotoAws, aws_backend, instances
from tests.support.wait import wait_for


def spot_job_text(name: str) -> str:
    """The spec of job `name`: spot V100 on aws in us-west-2a or 2b, no trace (the live market), checkpoints
    every 10 steps."""
    return f"""
name: {name}
script: train.py
backend: aws
resources: {{accelerator: V100, count: 1, spot: true}}
market: {{trace: null, zones: [us-west-2a, us-west-2b]}}
aws: {{ami: ami-12c6146b, region: us-west-2}}
checkpoint: {{interval: {{steps: 10}}}}
"""


class SimulatedInstances(threading.Thread):
    """The instance side of every attempt (simulated, see the module doc)."""

    def __init__(self, ec2, job_id: str, job_url: str, total_steps: int, interrupt_at: dict[int, int],
                 extra_progress: dict | None = None):
        super().__init__(daemon=True)
        self.ec2, self.job_id, self.store = ec2, job_id, open_store(job_url)
        self.total_steps, self.interrupt_at = total_steps, interrupt_at  # attempt -> step
        self.extra_progress = extra_progress or {}
        self.checkpoint = 0
        self.steps: dict[int, int] = {}
        self.seq = 0
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            for inst in instances(self.ec2, self.job_id):
                if inst["State"]["Name"] in ("pending", "running"):
                    self._tick(inst)

    def _event(self, attempt: int, kind: str, message: str, **data) -> None:
        self.seq += 1
        doc = {"attempt": attempt, "ts": time.time(), "kind": kind, "message": message, "data": data}
        self.store.write_bytes(f"events/{attempt:04d}-{self.seq:06d}.json", json.dumps(doc).encode())

    def _tick(self, inst: dict) -> None:
        attempt = int({t["Key"]: t["Value"] for t in inst["Tags"]}["spotfit:attempt"])
        if attempt not in self.steps:  # the runtime starts and restores the newest checkpoint
            self.steps[attempt] = self.checkpoint
            if self.checkpoint:
                self._event(attempt, "restored", f"restored step {self.checkpoint}", step=self.checkpoint)
        step = self.steps[attempt] = min(self.steps[attempt] + 2, self.total_steps)
        if step % 10 == 0:
            self.checkpoint = step
        progress = {"attempt": attempt, "phase": "training", "step": step, "total_steps": self.total_steps,
                    "loss": 1.0 / step, "timings": {}, "heartbeat_at": time.time(), **self.extra_progress}
        self.store.write_bytes("progress.json", json.dumps(progress).encode())
        preempt_key = f"attempts/{attempt:04d}/preempt.json"
        if step >= self.interrupt_at.get(attempt, self.total_steps + 1) or self.store.exists(preempt_key):
            self.checkpoint = step  # the notice checkpoint of the current step
            self._event(attempt, "exit", f"stopped with checkpoint at step {step} (exit 75)", code=75)
            self._end(inst, attempt, 75)
        elif step >= self.total_steps:
            self.store.write_bytes("result.json", json.dumps({"step": step, "weights_sha256": "0" * 64,
                                                              "metrics": {}}).encode())
            self._event(attempt, "done", f"script finished at step {step}", step=step)
            self._end(inst, attempt, 0)

    def _end(self, inst: dict, attempt: int, code: int) -> None:
        self.store.write_bytes(f"attempts/{attempt:04d}/exit.json", json.dumps({"code": code}).encode())
        self.ec2.terminate_instances(InstanceIds=[inst["InstanceId"]])  # shutdown -> terminate


def drive(aws: MotoAws, spec: str, total_steps: int, interrupt_at: dict[int, int] | None = None,
          timeout_s: float = 300.0, extra_progress: dict | None = None) -> dict:
    """Submit the spec at `spec`, drive the job to its end on moto; its status with its `events`.

    `interrupt_at` maps an attempt to the step where its spot instance is interrupted;
    `extra_progress`: fields every progress report carries too (a GPU reading).
    """
    job_id = sdk.submit(spec)
    backend = aws_backend(aws)
    side = SimulatedInstances(aws.ec2, job_id, sdk.status(job_id)["store"], total_steps, interrupt_at or {},
                              extra_progress)
    side.start()
    loop = threading.Thread(target=lambda: Controller(sdk.db(), job_id, backend=backend, poll_s=0.02).run(),
                            daemon=True)  # SQLite connections stay in the thread that made them
    loop.start()
    try:
        wait_for(lambda: not loop.is_alive(), timeout_s, f"the controller to drive job {job_id} to its end")
    finally:
        side.done.set()
    return {**sdk.status(job_id), "events": sdk.events(job_id)}
