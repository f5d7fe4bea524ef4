"""CloudWatch custom metrics of a running job (`aws.cloudwatch: true`), so that users can set alarms there.

While an attempt runs, the controller publishes, at most every `PUBLISH_EVERY_S`, what the
runtime reports and what the job has cost, with `put_metric_data` in the namespace `spotfit`,
dimensioned by `JobId` and `JobName`:

| metric | unit | from |
|---|---|---|
| `StepsPerSecond` | Count/Second | the steps between two publications ÷ the seconds between their heartbeats |
| `Loss` | None | the latest training loss (left out while it is NaN or not known) |
| `GPUUtilization` | Percent | the GPUs' mean busy percentage (only with a GPU: runtime/utilization.py) |
| `GPUMemoryUtilization` | Percent | the GPUs' memory used |
| `SpendUSD` | None | the job's cost so far: its ended attempts' bills and the live one's |

The controller publishes with its own AWS credentials, in `aws.region` (default us-east-1); a
failed call is recorded once as a `cloudwatch_failed` event and the job goes on.

Example (the pure request builder):

>>> data = metric_data("j-1", "digits", {"step": 40, "loss": 0.5, "gpu": {"util_pct": 80.0, "mem_pct": 30.0}},
...                    steps_per_s=2.0, spent_usd=0.25, at=0.0)
>>> [(d["MetricName"], d["Value"], d["Unit"]) for d in data]  # doctest: +NORMALIZE_WHITESPACE
[('StepsPerSecond', 2.0, 'Count/Second'), ('Loss', 0.5, 'None'), ('GPUUtilization', 80.0, 'Percent'),
 ('GPUMemoryUtilization', 30.0, 'Percent'), ('SpendUSD', 0.25, 'None')]
>>> data[0]["Dimensions"]
[{'Name': 'JobId', 'Value': 'j-1'}, {'Name': 'JobName', 'Value': 'digits'}]
"""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime
from typing import Any

NAMESPACE = "spotfit"
PUBLISH_EVERY_S = 60.0
DEFAULT_REGION = "us-east-1"


def metric_data(job_id: str, name: str, progress: dict[str, Any], steps_per_s: float | None, spent_usd: float,
                at: float) -> list[dict[str, Any]]:
    """The `MetricData` of one publication (metrics without a value are left out)."""
    gpu = progress.get("gpu") or {}
    loss = progress.get("loss")
    values = [("StepsPerSecond", steps_per_s, "Count/Second"),
              ("Loss", loss if isinstance(loss, int | float) and math.isfinite(loss) else None, "None"),
              ("GPUUtilization", gpu.get("util_pct"), "Percent"),
              ("GPUMemoryUtilization", gpu.get("mem_pct"), "Percent"),
              ("SpendUSD", spent_usd, "None")]
    dimensions = [{"Name": "JobId", "Value": job_id}, {"Name": "JobName", "Value": name}]
    stamp = datetime.fromtimestamp(at, UTC)
    return [{"MetricName": metric, "Dimensions": dimensions, "Timestamp": stamp, "Value": float(value),
             "Unit": unit} for metric, value, unit in values if value is not None]


class CloudWatchPublisher:
    """Publishes one job's metrics; `publish` returns an error line the first time a call fails."""

    failed_event = "cloudwatch_failed"

    def __init__(self, job_id: str, name: str, region: str | None, every_s: float | None = None,
                 client: Any = None):
        self.job_id = job_id
        self.name = name
        self.region = region or DEFAULT_REGION
        self.every_s = PUBLISH_EVERY_S if every_s is None else every_s
        self._client = client
        self._last: tuple[float, int] | None = None  # (heartbeat_at, step) of the last publication
        self._next = 0.0  # monotonic time of the next publication
        self._failed = False

    def publish(self, progress: dict[str, Any], spent_usd: float) -> str | None:
        """Publish when due; None, or (once) what went wrong."""
        if time.monotonic() < self._next:
            return None
        self._next = time.monotonic() + self.every_s
        at, step = float(progress.get("heartbeat_at") or time.time()), int(progress.get("step") or 0)
        rate = None
        if self._last is not None and at > self._last[0] and step >= self._last[1]:
            rate = (step - self._last[1]) / (at - self._last[0])
        self._last = (at, step)
        try:
            if self._client is None:
                from spotfit.backends.aws.client import load_boto3

                self._client = load_boto3().client("cloudwatch", region_name=self.region)
            self._client.put_metric_data(Namespace=NAMESPACE,
                                         MetricData=metric_data(self.job_id, self.name, progress, rate, spent_usd, at))
        except Exception as exc:  # noqa: BLE001 — metrics must never stop the job: say it once
            if self._failed:
                return None
            self._failed = True
            from spotfit.backends.aws.client import sdk_failure

            return f"CloudWatch metrics not published ({sdk_failure(exc) or f'{type(exc).__name__}: {exc}'})"
        return None
