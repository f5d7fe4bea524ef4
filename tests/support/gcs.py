"""A GCS API server on 127.0.0.1: `gcp-storage-emulator` (PyPI, pure Python), in memory, in this process.

`gcsfs` (the `gs://` store) reaches it through `STORAGE_EMULATOR_HOST`. No credential is found
(`GOOGLE_APPLICATION_CREDENTIALS` names a missing file, the metadata server a closed loopback
port), so gcsfs falls back to anonymous access, which the emulator allows: nothing asks Google
or a metadata address.

The emulator (2026.7) ignores `ifGenerationMatch=0`, the precondition with which gcsfs makes an
exclusive create (`pipe_file(mode="create")`, the store's `create_exclusive`); GCS answers 412
when the object exists. `honour_create_precondition` adds exactly that to its upload handler,
the check and the write under one lock. What the emulator still does not model: IAM, other
generation preconditions, and hierarchical or zonal buckets (`env()` turns gcsfs's lookup of
the bucket's type off: it asks a gRPC API the emulator does not serve, and waits 60 s for it).
"""

from __future__ import annotations

import logging
import socket
import threading
from http import HTTPStatus
from typing import Any

BUCKET = "spotfit-test"


class GcsEmulator:
    """The emulator with one bucket (`BUCKET`); `env()` points a process's gs:// at it."""

    def __init__(self) -> None:
        from gcp_storage_emulator.server import create_server

        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        logging.getLogger("gcsfs").setLevel(logging.ERROR)
        honour_create_precondition()
        self._server = create_server("127.0.0.1", self.port, in_memory=True, default_bucket=BUCKET)
        self.url = f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        self._server.start()

    def stop(self) -> None:
        self._server.stop()

    def env(self, missing_credentials: str = "/nonexistent/spotfit-test-credentials.json") -> dict[str, str]:
        return {"STORAGE_EMULATOR_HOST": self.url, "GOOGLE_APPLICATION_CREDENTIALS": missing_credentials,
                "GCE_METADATA_HOST": "127.0.0.1:9", "GCE_METADATA_IP": "127.0.0.1:9",
                # No zonal/hierarchical bucket lookup: it asks a gRPC API the emulator lacks, 60 s per bucket.
                "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false"}


_CREATE_LOCK = threading.Lock()


def honour_create_precondition() -> None:
    """Uploads with `ifGenerationMatch=0` fail with 412 when the object exists, as on GCS (idempotent)."""
    from gcp_storage_emulator import server
    from gcp_storage_emulator.handlers import objects

    original = objects.insert
    if getattr(original, "honours_create_precondition", False):
        return

    def insert(request: Any, response: Any, storage: Any, *args: Any, **kwargs: Any) -> Any:
        if request.query.get("ifGenerationMatch") != ["0"]:
            return original(request, response, storage, *args, **kwargs)
        name = (request.query.get("name") or [None])[0]
        if name is None and isinstance(request.data, dict):
            name = request.data.get("meta", {}).get("name")
        with _CREATE_LOCK:
            if name is not None and name in storage.objects.get(request.params["bucket_name"], {}):
                response.status = HTTPStatus.PRECONDITION_FAILED
                response.json({"error": {"code": 412, "message": "At least one of the pre-conditions you "
                                         "specified did not hold.", "errors": [{"reason": "conditionNotMet"}]}})
                return None
            return original(request, response, storage, *args, **kwargs)

    insert.honours_create_precondition = True  # type: ignore[attr-defined]
    objects.insert = insert
    for _, handlers in server.HANDLERS:
        for method, handler in list(handlers.items()):
            if handler is original:
                handlers[method] = insert
