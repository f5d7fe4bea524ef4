"""A Compute Engine API (v1, the part spotfit uses) over real HTTP on 127.0.0.1, stateful.

No emulator of Compute Engine exists, so the tests serve this one and point the official
`google-cloud-compute` client at it (`client_options={"api_endpoint": url}`, anonymous
credentials, REST transport). It keeps instances per (project, zone) and zone operations, and
answers the way Compute Engine does for what spotfit sends:

- `instances.insert`: checks the zone, the name (`[a-z]([-a-z0-9]{0,61}[a-z0-9])?`), the machine
  type's zone and that a spot VM asks `instanceTerminationAction`; a name taken is a 409
  `alreadyExists`; the VM is `RUNNING` and the operation is `RUNNING` on its first poll, `DONE`
  on the next (so the client really polls); an injected error ends the operation with the
  error's code and HTTP status (`fail_inserts`);
- `instances.get`, `instances.list` (with `labels.KEY=VALUE` filters), `instances.delete`
  (404 `notFound` for a VM that does not exist);
- `zoneOperations.get` and `zoneOperations.wait`;
- disks: each VM's boot disk (named as the VM, the `initializeParams` labels, `users` the VM),
  deleted with the VM when `autoDelete`; `disks.delete` (400 `resourceInUseByAnotherResource`
  while a VM uses it); `add_disk` leaves one behind, as a VM deleted without its disk does;
- `instances.aggregatedList` and `disks.aggregatedList` (`labels.KEY=VALUE` filters), keyed by
  `zones/ZONE`, as `spotfit gc` reads them;
- `zones.list` (each zone `UP`, its `region` a URL as Compute Engine gives it), and
  `machineTypes.get` / `acceleratorTypes.get` of a zone: a type is there unless the test limited
  the zone with `offer(zone, *names)`, then only those names are (404 `notFound` for the others).

What it does not model: regional or global operations, machine-type and accelerator catalogs
beyond `offer` and the zone checks, quotas (a test injects `QUOTA_EXCEEDED`), IAM (every call is allowed),
boot (a VM is RUNNING at once; the emulated instance harness runs its startup script).

The test's own hands: `preempt(name)` (a spot VM with `DELETE` is deleted, as Google does at the
end of the 30 s notice), `power_off(name)` (the VM is `TERMINATED`, as after `shutdown -h now`),
and `calls` (method, path) of every request.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.loopback_http import Handler, LoopbackServer

ZONES = ("us-central1-a", "us-central1-b", "us-central1-c", "us-central1-f", "us-east1-b", "us-east1-c",
         "europe-west4-a", "europe-west4-b")
_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_PATH = re.compile(r"^/compute/v1/projects/(?P<project>[^/]+)/zones/(?P<zone>[^/]+)/"
                   r"(?P<kind>instances|operations)(?:/(?P<name>[^/]+))?(?:/(?P<verb>wait))?$")
HTTP_STATUS = {"ZONE_RESOURCE_POOL_EXHAUSTED": 503, "QUOTA_EXCEEDED": 403}


class ApiError(Exception):
    def __init__(self, status: int, reason: str, message: str):
        super().__init__(message)
        self.status, self.reason, self.message = status, reason, message


class GceApi:
    """The emulated API; `url` is the `api_endpoint` to give the client."""

    def __init__(self, zones: tuple[str, ...] = ZONES):
        self.zones = set(zones)
        self.instances: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.operations: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.failures: dict[str, str] = {}  # zone -> error code of every insert there
        self.disks: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.offered: dict[str, set[str]] = {}  # zone -> the only machine and accelerator types it lists
        self._ids = itertools.count(1000)
        self._lock = threading.RLock()
        self._http = LoopbackServer(self._handler())
        self.url = self._http.url

    # -- the test's hands ---------------------------------------------------------------------------

    def fail_inserts(self, zone: str, code: str) -> None:
        """Every insert in `zone` ends with `code` (e.g. ZONE_RESOURCE_POOL_EXHAUSTED) from now on."""
        self.failures[zone] = code

    def offer(self, zone: str, *names: str) -> None:
        """`zone` lists only these machine and accelerator types from now on (none: nothing)."""
        self.offered[zone] = set(names)

    def live(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(i) for i in self.instances.values()]

    def find(self, name: str) -> tuple[str, str, str]:
        with self._lock:
            return next(k for k in self.instances if k[2] == name)

    def preempt(self, name: str) -> None:
        """Google reclaims a spot VM: with `instanceTerminationAction: DELETE` it is deleted."""
        with self._lock:
            key = self.find(name)
            if self.instances[key]["scheduling"].get("instanceTerminationAction") == "DELETE":
                self._drop_instance(key)
            else:
                self.instances[key]["status"] = "TERMINATED"

    def power_off(self, name: str) -> None:
        with self._lock:
            self.instances[self.find(name)]["status"] = "TERMINATED"

    def stop(self) -> None:
        self._http.stop()

    # -- the API ------------------------------------------------------------------------------------

    def _operation(self, project: str, zone: str, kind: str, target: str, error: str | None = None) -> dict:
        name = f"operation-{next(self._ids)}"
        op: dict[str, Any] = {
            "kind": "compute#operation", "id": str(next(self._ids)), "name": name, "operationType": kind,
            "zone": f"{self.url}/compute/v1/projects/{project}/zones/{zone}",
            "targetLink": f"{self.url}/compute/v1/projects/{project}/zones/{zone}/instances/{target}",
            "status": "RUNNING", "progress": 0, "_polls": 0,
            "selfLink": f"{self.url}/compute/v1/projects/{project}/zones/{zone}/operations/{name}"}
        if error:
            op["_error"] = error
        self.operations[project, zone, name] = op
        return _public(op)

    def _poll(self, project: str, zone: str, name: str) -> dict:
        op = self.operations.get((project, zone, name))
        if op is None:
            raise ApiError(404, "notFound", f"The resource 'operations/{name}' was not found")
        op["_polls"] += 1
        if op["_polls"] >= 2 and op["status"] != "DONE":
            op.update(status="DONE", progress=100)
            if "_error" in op:
                code = op["_error"]
                op["error"] = {"errors": [{"code": code, "message": f"{code}: emulated in {zone}"}]}
                op["httpErrorStatusCode"] = HTTP_STATUS.get(code, 400)
                op["httpErrorMessage"] = "SERVICE UNAVAILABLE" if code == "ZONE_RESOURCE_POOL_EXHAUSTED" else \
                    "FORBIDDEN"
        return _public(op)

    def _insert(self, project: str, zone: str, body: dict) -> dict:
        name = body.get("name", "")
        if not _NAME.fullmatch(name):
            raise ApiError(400, "invalid", f"Invalid value for field 'resource.name': '{name}'.")
        if not str(body.get("machineType", "")).startswith(f"zones/{zone}/machineTypes/"):
            raise ApiError(400, "invalid", f"Invalid value for field 'resource.machineType': "
                                           f"'{body.get('machineType')}'.")
        sched = body.get("scheduling") or {}
        if sched.get("provisioningModel") == "SPOT" and "instanceTerminationAction" not in sched:
            raise ApiError(400, "invalid", "Spot VMs need scheduling.instanceTerminationAction.")
        if (project, zone, name) in self.instances:
            raise ApiError(409, "alreadyExists", f"The resource 'projects/{project}/zones/{zone}/instances/{name}' "
                                                 "already exists")
        error = self.failures.get(zone)
        if error is None:
            self._boot_disks(project, zone, name, body)
            ip = f"10.128.0.{len(self.instances) + 2}"
            self.instances[project, zone, name] = {
                **body, "id": str(next(self._ids)), "status": "RUNNING", "zone": zone, "project": project,
                "networkInterfaces": [{**nic, "networkIP": ip} for nic in body.get("networkInterfaces", [])]}
        return self._operation(project, zone, "insert", name, error)

    def handle(self, method: str, path: str, query: dict[str, list[str]], body: dict | None) -> dict:
        answer = self._handle_disks(method, path, query)
        if answer is None:
            answer = self._handle_catalog(method, path)
        if answer is not None:
            return answer
        match = _PATH.match(path)
        if match is None:
            raise ApiError(404, "notFound", f"no such path {path}")
        project, zone, kind, name, verb = match.group("project", "zone", "kind", "name", "verb")
        if zone not in self.zones:
            raise ApiError(400, "invalid", f"Invalid value for field 'zone': '{zone}'. Unknown zone.")
        with self._lock:
            if kind == "operations":
                return self._poll(project, zone, name)  # get and wait alike
            if method == "POST" and name is None:
                return self._insert(project, zone, body or {})
            if method == "GET" and name is None:
                return {"kind": "compute#instanceList", "items": self._list(project, zone, query)}
            key = (project, zone, name)
            if key not in self.instances:
                raise ApiError(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/instances/{name}' "
                                                "was not found")
            if method == "GET":
                return self.instances[key]
            if method == "DELETE":
                self._drop_instance(key)
                return self._operation(project, zone, "delete", name)
        raise ApiError(405, "badRequest", f"{method} {path}")

    # -- zones, machine types, accelerator types ---------------------------------------------------------

    def _handle_catalog(self, method: str, path: str) -> dict | None:
        """`zones.list`, `machineTypes.get`, `acceleratorTypes.get`; None for any other path."""
        if method != "GET":
            return None
        zones = re.match(r"^/compute/v1/projects/([^/]+)/zones$", path)
        if zones:
            base = f"{self.url}/compute/v1/projects/{zones.group(1)}"
            return {"kind": "compute#zoneList", "items": [
                {"kind": "compute#zone", "name": z, "status": "UP", "selfLink": f"{base}/zones/{z}",
                 "region": f"{base}/regions/{z.rsplit('-', 1)[0]}"} for z in sorted(self.zones)]}
        typed = re.match(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/(machineTypes|acceleratorTypes)/([^/]+)$",
                         path)
        if typed is None:
            return None
        project, zone, kind, name = typed.groups()
        if zone not in self.zones or (zone in self.offered and name not in self.offered[zone]):
            raise ApiError(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/{kind}/{name}' "
                                            "was not found")
        return {"kind": f"compute#{kind[:-1]}", "name": name, "zone": zone}

    # -- disks and aggregated lists ------------------------------------------------------------------

    def add_disk(self, project: str, zone: str, name: str, labels: dict[str, str]) -> None:
        """A disk no VM uses (the test's hand: what a VM deleted without its disk leaves)."""
        with self._lock:
            self.disks[project, zone, name] = {"name": name, "zone": zone, "labels": dict(labels), "sizeGb": "100"}

    def _boot_disks(self, project: str, zone: str, name: str, body: dict) -> None:
        for disk in body.get("disks", []):
            params = disk.get("initializeParams") or {}
            self.disks[project, zone, name] = {
                "name": name, "zone": zone, "labels": dict(params.get("labels") or {}),
                "sizeGb": params.get("diskSizeGb", "10"), "users": [f"zones/{zone}/instances/{name}"],
                "_auto_delete": bool(disk.get("autoDelete"))}

    def _drop_instance(self, key: tuple[str, str, str]) -> None:
        del self.instances[key]
        disk = self.disks.get(key)
        if disk is not None and disk.get("users"):
            if disk.get("_auto_delete"):
                del self.disks[key]
            else:
                disk["users"] = []

    def _handle_disks(self, method: str, path: str, query: dict[str, list[str]]) -> dict | None:
        """The aggregated lists and the zone disks; None for any other path."""
        aggregated = re.match(r"^/compute/v1/projects/([^/]+)/aggregated/(instances|disks)$", path)
        zone_disk = re.match(r"^/compute/v1/projects/([^/]+)/zones/([^/]+)/disks/([^/]+)$", path)
        if aggregated and method == "GET":
            project, kind = aggregated.groups()
            with self._lock:
                pool = self.instances if kind == "instances" else self.disks
                items: dict[str, Any] = {}
                for (p, z, _), doc in sorted(pool.items()):
                    if p == project and _labelled(doc, query):
                        items.setdefault(f"zones/{z}", {kind: []})[kind].append(_public(doc))
            return {"kind": f"compute#{kind[:-1]}AggregatedList", "items": items}
        if zone_disk and method in ("GET", "DELETE"):
            project, zone, name = zone_disk.groups()
            with self._lock:
                disk = self.disks.get((project, zone, name))
                if disk is None:
                    raise ApiError(404, "notFound", f"The resource 'projects/{project}/zones/{zone}/disks/{name}' "
                                                    "was not found")
                if method == "GET":
                    return _public(disk)
                if disk.get("users"):
                    raise ApiError(400, "resourceInUseByAnotherResource",
                                   f"The disk resource '{name}' is already being used by '{disk['users'][0]}'")
                del self.disks[project, zone, name]
                return self._operation(project, zone, "delete", name)
        return None

    def _list(self, project: str, zone: str, query: dict[str, list[str]]) -> list[dict]:
        wanted = dict(re.findall(r"labels\.([\w-]+)\s*=\s*\"?([\w-]+)\"?", (query.get("filter") or [""])[0]))
        return [i for (p, z, _), i in sorted(self.instances.items())
                if p == project and z == zone and all(i.get("labels", {}).get(k) == v for k, v in wanted.items())]

    def _handler(self) -> type[Handler]:
        api = self

        class Compute(Handler):
            def _serve(self) -> None:
                url = urlparse(self.path)
                api.calls.append((self.command, url.path))
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length)) if length else None
                try:
                    status, doc = 200, api.handle(self.command, url.path, parse_qs(url.query), body)
                except ApiError as exc:
                    status = exc.status
                    doc = {"error": {"code": exc.status, "message": exc.message,
                                     "errors": [{"message": exc.message, "domain": "global", "reason": exc.reason}]}}
                self.reply(status, json.dumps(doc), "application/json")

            do_GET = do_POST = do_DELETE = _serve

        return Compute


def _labelled(doc: dict, query: dict[str, list[str]]) -> bool:
    wanted = dict(re.findall(r"labels\.([\w-]+)\s*=\s*\"?([\w-]+)\"?", (query.get("filter") or [""])[0]))
    return all(doc.get("labels", {}).get(k) == v for k, v in wanted.items())


def _public(op: dict) -> dict:
    return {k: v for k, v in op.items() if not k.startswith("_")}
