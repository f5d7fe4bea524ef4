"""A pod that no node takes (an empty spot node pool) ends its attempt `no_capacity`, as on AWS.

The emulator's kubelet runs nothing (`run_pods=False`), so the attempt's pod stays Pending,
unscheduled, as the scheduler leaves it when no node has room. After
`kubernetes.pending_timeout_s` the real controller loop must delete the Job, record the attempt
`no_capacity` (nothing billed) with a `no_capacity` event, and go on as its policy says: here,
without a market, it waits for spot capacity. The test waits on states and events, each with a
deadline; the short timeout only makes it quick.
"""

from __future__ import annotations

from spotfit import sdk
from tests.support.jobs import write_spec
from tests.support.kube import FakeCluster
from tests.support.kube_controller import drive
from tests.support.wait import wait_for

SPEC = """
name: kube-pending
script: train.py
backend: kubernetes
resources: {{accelerator: CPU, spot: true}}
market: {{trace: null}}
kubernetes: {{kubeconfig: "{kubeconfig}", spot: eks, pending_timeout_s: 0.5}}
"""
DEADLINE_S = 120.0


def test_a_pod_no_node_takes_ends_the_attempt_no_capacity_and_its_job_is_deleted(tmp_path):
    src = tmp_path / "src" / "train.py"
    src.parent.mkdir(parents=True)
    src.write_text("print('never runs')\n")
    (tmp_path / "cluster").mkdir()
    with FakeCluster(tmp_path / "cluster", run_pods=False) as cluster:
        spec = write_spec(tmp_path / "job", SPEC.format(kubeconfig=cluster.write_kubeconfig(tmp_path / "kc")),
                          script=src)
        job_id = sdk.submit(str(spec))
        run = drive(job_id)
        wait_for(lambda: any(p["status"]["phase"] == "Pending" for p in cluster.pods()), DEADLINE_S,
                 "the first attempt's pod to be created and left Pending")
        wait_for(lambda: [a["state"] for a in sdk.status(job_id)["attempts"]][:1] == ["no_capacity"], DEADLINE_S,
                 "attempt 1 to end no_capacity after the pending timeout")
        wait_for(lambda: sdk.status(job_id)["state"] == "waiting", DEADLINE_S,
                 "the job to wait for spot capacity (the policy without a market)")
        doc = sdk.status(job_id)
        jobs_left = [key for key in cluster.objects if key[0] in ("jobs", "pods")]
        sdk.cancel(job_id)
        run["thread"].join(DEADLINE_S)
        assert run["outcome"].get("state") == "cancelled", doc

    first = doc["attempts"][0]
    assert first["billed_s"] == 0.0 and first["cost_usd"] == 0.0
    events = [e for e in sdk.events(job_id) if e["kind"] == "no_capacity"]
    assert events and events[0]["attempt"] == 1 and "pending timeout (0.5s)" in events[0]["message"]
    assert jobs_left == []  # the Job and its pod were deleted
    assert len(doc["attempts"]) == 1 and "waiting for spot capacity" in doc["message"]
