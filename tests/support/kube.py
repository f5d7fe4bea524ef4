"""A small stateful Kubernetes API on 127.0.0.1, with a Job controller and a kubelet that run pods locally.

Why our own: `mockernetes` is not on the package index here; `kmock` (0.8) is, and keeps
objects with watch streams and finalizer-aware deletion, but it ignores label selectors,
has no status subresource, no owner-based garbage collection, no uid or resourceVersion, and
runs on aiohttp/asyncio (docs/kubernetes.md, "What the emulator does not model"). The backend
needs exactly the first three, and a kubelet on top, so this fake serves the few endpoints
the backend calls, over real HTTP, to the real `kubernetes` client:

- namespaced Secrets, Services, Pods (list by `labelSelector`, get, delete with
  `gracePeriodSeconds`, the `eviction` subresource), batch/v1 Jobs, kubeflow.org/v1 TFJobs;
- the `tfjobs.kubeflow.org` CRD, present or not;
- a Job controller: a Job's pods (one, or one per index for an Indexed Job, with
  `JOB_COMPLETION_INDEX` and the completion-index annotation), `backoffLimit: 0` (one failed
  pod fails the Job, whose other pods are then deleted), deletion of a Job's pods with it;
- a kubelet: a pod's container runs as a local process (the pod entry of its command, with the
  container's `env`, `envFrom` Secrets and `fieldRef` namespace; the install lines before it
  are not run), phases Pending → Running → Succeeded/Failed with the exit code (with
  `run_pods=False` no node fits: pods stay Pending with `PodScheduled` False, `Unschedulable`); a graceful
  deletion sends SIGTERM and SIGKILL (to the whole process tree, as a container's cgroup) after
  the grace period, then removes the pod; `reclaim_node` plays a spot node going away under
  the graceful node shutdown: `DisruptionTarget` (TerminationByKubelet), SIGTERM, SIGKILL after
  the grace period, the pod left `Failed` with reason `Terminated`;
- Nodes (`nodes={name: labels}`, read with GET `/api/v1/nodes[/NAME]`): the kubelet puts a pod on
  the first node whose labels match its `nodeSelector` (else the first node) and sets
  `spec.nodeName`; without nodes, pods run with no node named, as before.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import signal
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlparse

import psutil

from tests.support.loopback_http import serve_in_thread

POD_ENTRY = 'exec python3 -m spotfit.backends.kubernetes.pod "$SPOTFIT_JOB_URL" "$SPOTFIT_ATTEMPT"'
_PATH = re.compile(r"^/(?:api/v1|apis/(?P<group>[^/]+)/(?P<version>[^/]+))/namespaces/(?P<ns>[^/]+)/"
                   r"(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>[^/]+))?$")
_NODE = re.compile(r"^/api/v1/nodes(?:/(?P<name>[^/]+))?$")
_CRD = re.compile(r"^/apis/apiextensions.k8s.io/v1/customresourcedefinitions/(?P<name>[^/]+)$")


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _field(obj: dict, path: str) -> str | None:
    """The value at a field selector's dotted path (`involvedObject.name`)."""
    value: object = obj
    for part in path.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return None if value is None else str(value)


def _status(code: int, reason: str, message: str) -> dict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
            "reason": reason, "code": code}


class FakeCluster:
    """The API server, Job controller and kubelet of one test (see the module doc)."""

    def __init__(self, folder: Path, tfjob_crd: bool = False, run_pods: bool = True,
                 nodes: dict[str, dict[str, str]] | None = None):
        self.folder = folder
        self.nodes = {name: {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}}
                      for name, labels in (nodes or {}).items()}
        self.tfjob_crd = tfjob_crd
        self.run_pods = run_pods  # False: pods stay Pending (no node has room), as the scheduler leaves them
        self.objects: dict[tuple[str, str, str], dict] = {}  # (plural, namespace, name) -> object
        self.requests: list[tuple[str, str]] = []  # (method, path) in order
        self._procs: dict[str, subprocess.Popen] = {}  # pod name -> its container's process
        self._kill_at: dict[str, float] = {}  # pod name -> when SIGKILL is due
        self._version = 0
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._kubelet_thread = threading.Thread(target=self._kubelet, daemon=True)

    # -- the test's side ------------------------------------------------------------------------

    def __enter__(self) -> FakeCluster:
        serve_in_thread(self._server)
        self._kubelet_thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            for name in list(self._procs):
                self._kill_tree(name, signal.SIGKILL)
        for proc in self._procs.values():
            proc.wait(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def write_kubeconfig(self, path: Path, context: str = "fake") -> Path:
        config = {"apiVersion": "v1", "kind": "Config", "current-context": context,
                  "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                  "users": [{"name": "tester", "user": {"token": "test-token"}}],
                  "contexts": [{"name": context, "context": {"cluster": "fake", "user": "tester"}}]}
        path.write_text(json.dumps(config))
        return path

    def pods(self, **labels: str) -> list[dict]:
        with self._lock:
            return [dict(o) for (plural, _, _), o in self.objects.items() if plural == "pods"
                    and all(o["metadata"].get("labels", {}).get(k) == v for k, v in labels.items())]

    def reclaim_node(self, pod_name: str, namespace: str = "default") -> None:
        """The pod's spot node goes away (graceful node shutdown): DisruptionTarget, SIGTERM, SIGKILL after grace."""
        with self._lock:
            pod = self.objects[("pods", namespace, pod_name)]
            self._condition(pod, "TerminationByKubelet", "Pod was terminated in response to imminent node shutdown.")
            pod["status"]["reason"] = "Terminated"
            self._terminate(pod, int(pod["spec"].get("terminationGracePeriodSeconds", 30)))
            self._touch(pod)

    def lose_node(self, pod_name: str, namespace: str = "default", reason: str = "RemovingNode") -> None:
        """The pod's node vanishes without a drain: no condition, the pod ends failed (137), the node has an event."""
        with self._lock:
            pod = self.objects[("pods", namespace, pod_name)]
            node = pod["spec"].setdefault("nodeName", f"node-{pod_name}")
            if pod_name in self._procs:
                self._kill_tree(pod_name, signal.SIGKILL)
            pod["status"] |= {"phase": "Failed", "containerStatuses": [{
                "name": pod["spec"]["containers"][0]["name"], "ready": False, "restartCount": 0,
                "image": pod["spec"]["containers"][0]["image"], "imageID": "",
                "state": {"terminated": {"exitCode": 137, "reason": "Error"}}}]}
            self._touch(pod)
            self._pod_ended(pod)
            event = {"apiVersion": "v1", "kind": "Event", "metadata": {"name": f"{node}.{reason.lower()}",
                                                                       "namespace": "default"},
                     "involvedObject": {"kind": "Node", "name": node}, "reason": reason,
                     "message": f"Node {node} event: {reason}", "type": "Normal"}
            self.objects[("events", "default", event["metadata"]["name"])] = event

    # -- the API server -------------------------------------------------------------------------

    def _handler(self):
        cluster = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:  # quiet
                pass

            def _reply(self, code: int, doc: dict) -> None:
                data = json.dumps(doc).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _serve(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                url = urlparse(self.path)
                cluster.requests.append((method, url.path))
                code, doc = cluster._serve(method, url.path, parse_qs(url.query), body)
                self._reply(code, doc)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

            def do_DELETE(self) -> None:
                self._serve("DELETE")

        return Handler

    def _serve(self, method: str, path: str, query: dict, body: dict | None) -> tuple[int, dict]:
        node = _NODE.match(path)
        if node and method == "GET":
            if node["name"] is None:
                return 200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": list(self.nodes.values())}
            if node["name"] in self.nodes:
                return 200, self.nodes[node["name"]]
            return 404, _status(404, "NotFound", f"nodes {node['name']!r} not found")
        crd = _CRD.match(path)
        if crd:
            if self.tfjob_crd and crd["name"] == "tfjobs.kubeflow.org":
                return 200, {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                             "metadata": {"name": crd["name"]},
                             "spec": {"group": "kubeflow.org", "scope": "Namespaced",
                                      "names": {"plural": "tfjobs", "kind": "TFJob"},
                                      "versions": [{"name": "v1", "served": True, "storage": True}]}}
            return 404, _status(404, "NotFound", f"customresourcedefinitions {crd['name']!r} not found")
        match = _PATH.match(path)
        if not match or match["plural"] not in ("secrets", "services", "pods", "jobs", "tfjobs", "events"):
            return 404, _status(404, "NotFound", f"no route {method} {path}")
        if match["plural"] == "tfjobs" and not self.tfjob_crd:
            return 404, _status(404, "NotFound", "the server could not find the requested resource")
        plural, ns, name, sub = match["plural"], match["ns"], match["name"], match["sub"]
        with self._lock:
            if method == "POST" and sub == "eviction":
                return self._evict(ns, name, body or {})
            if method == "POST":
                return self._create(plural, ns, body or {})
            key = (plural, ns, name or "")
            if method == "GET" and name is None:
                selector = dict(p.split("=", 1) for p in query.get("labelSelector", [""])[0].split(",") if p)
                fields = dict(p.split("=", 1) for p in query.get("fieldSelector", [""])[0].split(",") if p)
                items = [o for (pl, n, _), o in self.objects.items() if pl == plural and n == ns
                         and all(o["metadata"].get("labels", {}).get(k) == v for k, v in selector.items())
                         and all(_field(o, k) == v for k, v in fields.items())]
                return 200, {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": str(self._version)},
                             "items": items}
            if key not in self.objects:
                return 404, _status(404, "NotFound", f"{plural} {name!r} not found")
            if method == "GET":
                return 200, self.objects[key]
            grace = query.get("gracePeriodSeconds")
            return 200, self._delete(key, int(grace[0]) if grace else None)

    def _create(self, plural: str, ns: str, obj: dict) -> tuple[int, dict]:
        name = obj["metadata"]["name"]
        if (plural, ns, name) in self.objects:
            return 409, _status(409, "AlreadyExists", f"{plural} {name!r} already exists")
        obj = json.loads(json.dumps(obj))
        obj["metadata"] |= {"namespace": ns, "uid": secrets.token_hex(8), "creationTimestamp": _now()}
        self.objects[(plural, ns, name)] = obj
        self._touch(obj)
        if plural == "jobs":
            obj["status"] = {"active": 0}
            self._start_job(obj)
        return 201, obj

    def _touch(self, obj: dict) -> None:
        self._version += 1
        obj["metadata"]["resourceVersion"] = str(self._version)

    # -- the Job controller -----------------------------------------------------------------------

    def _start_job(self, job: dict) -> None:
        spec = job["spec"]
        indexed = spec.get("completionMode") == "Indexed"
        for index in range(int(spec.get("completions", 1))):
            template = json.loads(json.dumps(spec["template"]))
            name = f"{job['metadata']['name']}-{index}-{secrets.token_hex(3)}" if indexed \
                else f"{job['metadata']['name']}-{secrets.token_hex(3)}"
            meta = template.get("metadata", {})
            labels = {**meta.get("labels", {}), "job-name": job["metadata"]["name"],
                      "controller-uid": job["metadata"]["uid"]}
            annotations = {"batch.kubernetes.io/job-completion-index": str(index)} if indexed else {}
            pod = {"apiVersion": "v1", "kind": "Pod",
                   "metadata": {"name": name, "namespace": job["metadata"]["namespace"], "labels": labels,
                                "annotations": annotations, "uid": secrets.token_hex(8), "creationTimestamp": _now(),
                                "ownerReferences": [{"apiVersion": "batch/v1", "kind": "Job", "controller": True,
                                                     "name": job["metadata"]["name"], "uid": job["metadata"]["uid"]}]},
                   "spec": template["spec"], "status": {"phase": "Pending", "conditions": []}}
            if indexed:
                pod["spec"] = {**pod["spec"], "hostname": f"{job['metadata']['name']}-{index}"}
            self._touch(pod)
            self.objects[("pods", pod["metadata"]["namespace"], name)] = pod

    def _job_of(self, pod: dict) -> dict | None:
        owner = next(iter(pod["metadata"].get("ownerReferences", [])), None)
        return self.objects.get(("jobs", pod["metadata"]["namespace"], owner["name"])) if owner else None

    def _pod_ended(self, pod: dict) -> None:
        job = self._job_of(pod)
        if job is None:
            return
        failed = pod["status"]["phase"] == "Failed"
        job["status"]["failed" if failed else "succeeded"] = job["status"].get("failed" if failed else "succeeded",
                                                                                0) + 1
        if failed and job["status"]["failed"] > int(job["spec"].get("backoffLimit", 6)):
            job["status"]["conditions"] = [{"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}]
            for (plural, _ns, _), other in list(self.objects.items()):
                if plural == "pods" and self._job_of(other) is job and other["status"]["phase"] in ("Pending",
                                                                                                    "Running"):
                    self._terminate(other, int(other["spec"].get("terminationGracePeriodSeconds", 30)))
        self._touch(job)

    # -- deletion and eviction --------------------------------------------------------------------

    def _delete(self, key: tuple[str, str, str], grace_s: int | None) -> dict:
        obj = self.objects[key]
        if key[0] == "pods" and key[2] in self._procs and self._procs[key[2]].poll() is None:
            self._terminate(obj, int(obj["spec"].get("terminationGracePeriodSeconds", 30)) if grace_s is None
                            else grace_s, remove=True)
            return obj
        if key[0] == "pods" and obj["status"]["phase"] in ("Pending", "Running"):  # never ran: failed at once
            obj["status"]["phase"] = "Failed"
            self._pod_ended(obj)
        del self.objects[key]
        if key[0] in ("jobs", "tfjobs"):  # the garbage collector: the owner's pods go with it
            for pod_key, pod in list(self.objects.items()):
                if pod_key[0] == "pods" and self._job_of(pod) is None and pod["metadata"].get("ownerReferences"):
                    self._delete(pod_key, None)
        if key[0] in ("pods", "services"):
            return obj
        return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}

    def _evict(self, ns: str, name: str, body: dict) -> tuple[int, dict]:
        key = ("pods", ns, name)
        if key not in self.objects:
            return 404, _status(404, "NotFound", f"pods {name!r} not found")
        pod = self.objects[key]
        self._condition(pod, "EvictionByEvictionAPI", "Eviction API: evicting")
        grace = (body.get("deleteOptions") or {}).get("gracePeriodSeconds")
        self._delete(key, grace)
        return 201, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}

    @staticmethod
    def _condition(pod: dict, reason: str, message: str) -> None:
        pod["status"].setdefault("conditions", []).append(
            {"type": "DisruptionTarget", "status": "True", "reason": reason, "message": message,
             "lastTransitionTime": _now()})

    def _terminate(self, pod: dict, grace_s: int, remove: bool = False) -> None:
        """SIGTERM now, SIGKILL after `grace_s`; `remove`: the object goes once the process ended."""
        name = pod["metadata"]["name"]
        pod["metadata"]["deletionTimestamp"] = pod["metadata"].get("deletionTimestamp") or _now()
        if remove:
            pod["metadata"]["remove"] = True
        if name not in self._procs:  # never started: nothing to signal, it fails at once
            if pod["status"]["phase"] == "Pending":
                pod["status"]["phase"] = "Failed"
                self._touch(pod)
                self._pod_ended(pod)
            if remove:
                del self.objects[("pods", pod["metadata"]["namespace"], name)]
            return
        # SIGTERM goes to the container's main process; a SIGKILL (no grace) ends the whole container,
        # as its cgroup's kill would: the runtime in a session of its own too.
        self._kill_tree(name, signal.SIGTERM if grace_s > 0 else signal.SIGKILL, container_only=grace_s > 0)
        self._kill_at.setdefault(name, time.monotonic() + grace_s)

    def _kill_tree(self, name: str, sig: int, container_only: bool = False) -> None:
        """Signal the container: its main process (SIGTERM goes to PID 1 only), or every process in it."""
        proc = self._procs[name]
        if proc.poll() is not None:
            return
        try:
            targets = [psutil.Process(proc.pid)]
            if not container_only:
                targets += targets[0].children(recursive=True)
        except psutil.NoSuchProcess:
            return
        for target in targets:
            try:
                target.send_signal(sig)
            except psutil.NoSuchProcess:
                continue

    # -- the kubelet ------------------------------------------------------------------------------

    def _kubelet(self) -> None:
        while not self._stop.wait(0.05):
            with self._lock:
                for key, pod in list(self.objects.items()):
                    if key[0] == "pods":
                        self._sync(key, pod)

    def _sync(self, key: tuple[str, str, str], pod: dict) -> None:
        name = key[2]
        status = pod["status"]
        if status["phase"] == "Pending" and "deletionTimestamp" not in pod["metadata"]:
            if self.run_pods:
                self._run(pod)
            elif not status["conditions"]:  # what the scheduler writes when no node fits the pod
                status["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                         "message": "0/3 nodes are available: 3 node(s) didn't match Pod's "
                                                    "node affinity/selector."}]
                self._touch(pod)
            return
        proc = self._procs.get(name)
        if proc is None:
            return
        if name in self._kill_at and time.monotonic() >= self._kill_at[name] and proc.poll() is None:
            self._kill_tree(name, signal.SIGKILL)
        code = proc.poll()
        if code is None or status["phase"] in ("Succeeded", "Failed"):
            if code is not None and pod["metadata"].get("remove"):
                del self.objects[key]
            return
        code = code if code >= 0 else 128 - code
        status["phase"] = "Succeeded" if code == 0 else "Failed"
        status["containerStatuses"] = [{"name": pod["spec"]["containers"][0]["name"], "ready": False,
                                        "restartCount": 0, "image": pod["spec"]["containers"][0]["image"],
                                        "imageID": "", "state": {"terminated": {"exitCode": code,
                                                                                "reason": "Completed" if code == 0
                                                                                else "Error"}}}]
        self._touch(pod)
        self._pod_ended(pod)
        if pod["metadata"].get("remove"):
            del self.objects[key]

    def _run(self, pod: dict) -> None:
        container = pod["spec"]["containers"][0]
        script = container["command"][-1]
        assert script.rstrip().endswith(POD_ENTRY), f"the container does not end with the pod entry: {script!r}"
        env = {**os.environ, **self._container_env(pod)}
        if "JOB_COMPLETION_INDEX" not in env and pod["metadata"].get("annotations", {}).get(
                "batch.kubernetes.io/job-completion-index"):
            env["JOB_COMPLETION_INDEX"] = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
        with open(self.folder / f"{pod['metadata']['name']}.log", "ab") as log:
            self._procs[pod["metadata"]["name"]] = subprocess.Popen(
                [sys.executable, "-m", "spotfit.backends.kubernetes.pod", env["SPOTFIT_JOB_URL"],
                 env["SPOTFIT_ATTEMPT"]],
                env=env, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        selector = pod["spec"].get("nodeSelector") or {}
        fits = [n for n, o in self.nodes.items() if selector.items() <= o["metadata"]["labels"].items()]
        if fits or self.nodes:
            pod["spec"]["nodeName"] = (fits or list(self.nodes))[0]
        pod["status"] |= {"phase": "Running", "startTime": _now(),
                          "containerStatuses": [{"name": container["name"], "ready": True, "restartCount": 0,
                                                 "image": container["image"], "imageID": "",
                                                 "state": {"running": {"startedAt": _now()}}}]}
        self._touch(pod)

    def _container_env(self, pod: dict) -> dict[str, str]:
        container = pod["spec"]["containers"][0]
        ns = pod["metadata"]["namespace"]
        env: dict[str, str] = {}
        for ref in container.get("envFrom", []):
            secret = self.objects[("secrets", ns, ref["secretRef"]["name"])]
            env |= dict(secret.get("stringData", {}))
        for item in container.get("env", []):
            if "value" in item:
                env[item["name"]] = item["value"]
            elif item.get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "metadata.namespace":
                env[item["name"]] = ns
        return env
