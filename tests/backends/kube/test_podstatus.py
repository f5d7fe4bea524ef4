"""How an attempt's outcome is read from its pods (pure) and classified by the controller."""

from __future__ import annotations

from spotfit.backends.kubernetes.podstatus import attempt_status
from spotfit.controller.outcome import classify


def _pod(index: int = 0, phase: str = "Running", code: int | None = None, disrupted: bool = False,
         reason: str | None = None) -> dict:
    status: dict = {"phase": phase, "conditions": []}
    if code is not None:
        status["containerStatuses"] = [{"name": "spotfit", "state": {"terminated": {"exitCode": code}}}]
    if disrupted:
        status["conditions"].append({"type": "DisruptionTarget", "status": "True", "reason": "DeletionByTaintManager"})
    if reason:
        status["reason"] = reason
    return {"metadata": {"annotations": {"batch.kubernetes.io/job-completion-index": str(index)}}, "status": status}


def _outcome(pods, workers=1, owner_active=True) -> str:
    st = attempt_status(pods, workers, owner_active)
    return "running" if st.running else str(classify(st.exit_code, st.signal, st.disrupted))


def test_a_reclaimed_node_is_a_preemption_whatever_the_exit_code():
    assert _outcome([_pod(phase="Failed", code=75, disrupted=True)]) == "preempted"
    assert _outcome([_pod(phase="Failed", code=137, disrupted=True)]) == "preempted"  # killed before it saved
    assert _outcome([_pod(phase="Failed", code=143, reason="Terminated")]) == "preempted"  # node shutdown


def test_exit_codes_without_disruption():
    assert _outcome([_pod(phase="Succeeded", code=0)]) == "completed"
    assert _outcome([_pod(phase="Failed", code=75)]) == "preempted"
    assert _outcome([_pod(phase="Failed", code=1)]) == "failed"
    assert _outcome([_pod(phase="Failed", code=76)]) == "stopped"


def test_pending_or_missing_pods_of_a_live_job_are_running():
    assert _outcome([]) == "running"
    assert _outcome([_pod(phase="Pending")]) == "running"


def test_a_pod_without_a_node_is_unscheduled_and_a_bound_one_is_not():
    waiting = _pod(phase="Pending")
    waiting["status"]["conditions"].append({"type": "PodScheduled", "status": "False", "reason": "Unschedulable"})
    bound = {**_pod(phase="Pending"), "spec": {"nodeName": "spot-1"}}  # pulling its image: the pool had room
    assert attempt_status([waiting], 1, owner_active=True).unscheduled
    assert not attempt_status([bound], 1, owner_active=True).unscheduled
    assert not attempt_status([_pod()], 1, owner_active=True).unscheduled
    assert attempt_status([_pod(0), _pod(1, phase="Pending")], 2, owner_active=True).unscheduled  # one worker waits


def test_a_finished_job_without_pods_ends_and_the_store_tells_the_code():
    st = attempt_status([], 1, owner_active=False)
    assert not st.running and st.exit_code is None and st.signal is None


def test_several_workers():
    done, running = _pod(0, "Succeeded", 0), _pod(1)
    assert _outcome([done, running], workers=2) == "running"  # the other may still finish
    assert _outcome([done, _pod(1, "Succeeded", 0)], workers=2) == "completed"
    assert _outcome([_pod(0), _pod(1, "Failed", 1)], workers=2) == "failed"  # one failed: the attempt is over
    assert _outcome([_pod(0), _pod(1, "Failed", 137, disrupted=True)], workers=2) == "preempted"
