"""How an attempt stands, read from its pods: a pure function over the pods the API lists.

A pod was taken away by the platform (spot reclaim, node drain, preemption by the scheduler)
when it carries the `DisruptionTarget` condition (Kubernetes ≥ 1.26 sets it before it sends
SIGTERM), when the kubelet ended it for a node shutdown (`status.reason`), or when events about
the pod or its node say the node went away (`node_gone`: the backend asks for those only when
an attempt ended otherwise unexplained). Such an attempt is preempted whatever its exit code;
the runtime's own 75 says the same after it saved.

An attempt whose pods wait for a node (Pending, not scheduled: an empty spot node pool) is
running but `unscheduled`; the controller ends it `no_capacity` after `kubernetes.pending_timeout_s`.

Several workers train together: one that ends preempted or failed ends the attempt (the
controller then stops the others); ones that end done wait for the rest.

>>> pod = {"metadata": {"labels": {}}, "status": {"phase": "Failed", "conditions": [
...        {"type": "DisruptionTarget", "status": "True", "reason": "TerminationByKubelet"}],
...        "containerStatuses": [{"name": "spotfit", "state": {"terminated": {"exitCode": 75}}}]}}
>>> attempt_status([pod], workers=1, owner_active=True)
AttemptStatus(running=False, exit_code=75, signal=None, disrupted=True, unscheduled=False)
"""

from __future__ import annotations

from typing import Any

from spotfit.attempt.exit_codes import EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED
from spotfit.backends.base import AttemptStatus

_ENDED_OK = (EXIT_DONE, EXIT_PREEMPTED, EXIT_STOPPED)
_SAVED = (EXIT_PREEMPTED, EXIT_STOPPED)  # ended early, after a save
_SHUTDOWN_REASONS = {"NodeShutdown", "Shutdown", "Terminated"}  # the kubelet's graceful node shutdown
# Event reasons that say a pod's node went away: the node lifecycle controller and taint manager
# (NodeNotReady, TaintManagerEviction, RemovingNode, DeletingNode), the kubelet's node shutdown
# (NodeShutdown, Shutdown), AWS Node Termination Handler (SpotInterruption).
NODE_GONE_REASONS = {"NodeNotReady", "TaintManagerEviction", "RemovingNode", "DeletingNode", "NodeShutdown",
                     "Shutdown", "SpotInterruption"}
_INDEX_KEYS = ("batch.kubernetes.io/job-completion-index", "training.kubeflow.org/replica-index")


def worker_index(pod: dict[str, Any]) -> int:
    """The worker index of `pod` (Indexed Job or TFJob label/annotation); 0 for a one-pod Job."""
    meta = pod.get("metadata") or {}
    for source in (meta.get("labels") or {}, meta.get("annotations") or {}):
        for key in _INDEX_KEYS:
            if key in source:
                return int(source[key])
    return 0


def disrupted(pod: dict[str, Any]) -> bool:
    """Whether the platform took `pod`'s node (or the pod) away."""
    status = pod.get("status") or {}
    if any(c.get("type") == "DisruptionTarget" and c.get("status") == "True" for c in status.get("conditions") or []):
        return True
    return status.get("reason") in _SHUTDOWN_REASONS


def exit_code(pod: dict[str, Any]) -> int | None:
    """The exit code of `pod`'s container once it terminated, else None."""
    for container in (pod.get("status") or {}).get("containerStatuses") or []:
        terminated = (container.get("state") or {}).get("terminated")
        if terminated is not None:
            return int(terminated.get("exitCode", 0))
    return None


def owner_finished(owner: dict[str, Any]) -> bool:
    """Whether a Job (Complete, Failed) or TFJob (Succeeded, Failed) has finished.

    >>> owner_finished({"status": {"conditions": [{"type": "Failed", "status": "True"}]}})
    True
    """
    return any(c.get("type") in ("Complete", "Succeeded", "Failed") and c.get("status") == "True"
               for c in (owner.get("status") or {}).get("conditions") or [])


def node_gone(events: list[dict[str, Any]]) -> bool:
    """Whether `events` (about a pod or its node) say the node was reclaimed or lost.

    >>> node_gone([{"reason": "Scheduled"}]), node_gone([{"reason": "RemovingNode"}])
    (False, True)
    """
    return any(e.get("reason") in NODE_GONE_REASONS for e in events)


def unscheduled(pod: dict[str, Any]) -> bool:
    """Whether `pod` waits for a node: Pending with no node bound (PodScheduled False or not yet set).

    >>> unscheduled({"spec": {}, "status": {"phase": "Pending", "conditions": [
    ...     {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}})
    True
    >>> unscheduled({"spec": {"nodeName": "n1"}, "status": {"phase": "Pending"}})
    False
    """
    status = pod.get("status") or {}
    if status.get("phase") != "Pending" or (pod.get("spec") or {}).get("nodeName"):
        return False
    conditions = status.get("conditions") or []
    return not any(c.get("type") == "PodScheduled" and c.get("status") == "True" for c in conditions)


def finished(pod: dict[str, Any]) -> bool:
    return (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or exit_code(pod) is not None


def attempt_status(pods: list[dict[str, Any]], workers: int, owner_active: bool) -> AttemptStatus:
    """The attempt's status from its pods; `owner_active`: its Job (TFJob) exists and has not finished."""
    was_disrupted = any(disrupted(p) for p in pods)
    done = {worker_index(p): exit_code(p) for p in pods if finished(p)}
    if not pods or not done:
        if owner_active:  # a pod still without a node: the pool may be empty (the controller's pending timeout)
            return AttemptStatus(running=True, unscheduled=any(unscheduled(p) for p in pods))
        return AttemptStatus(running=False, disrupted=was_disrupted)  # the exit record in the store tells
    failed = [c for c in done.values() if c is not None and c not in _ENDED_OK]
    stopped_early = any(c in _SAVED for c in done.values())
    if len(done) < max(workers, 1) and not failed and not stopped_early and not was_disrupted and owner_active:
        return AttemptStatus(running=True)
    if failed and not was_disrupted:
        return AttemptStatus(running=False, exit_code=failed[0])
    code = next((c for c in done.values() if c in _SAVED), done.get(0))
    return AttemptStatus(running=False, exit_code=code, disrupted=was_disrupted)
