"""The real controller loop over the Kubernetes backend, in a thread (the emulator lives in this process)."""

from __future__ import annotations

import threading

from spotfit import sdk
from spotfit.backends.kubernetes.backend import KubernetesBackend
from spotfit.controller.loop import Controller


def drive(job_id: str, backend: KubernetesBackend | None = None) -> dict:
    """Start the controller of `job_id`; `{"thread": ..., "outcome": {"state": ...}}` (set when it ends)."""
    outcome: dict = {}

    def run() -> None:  # SQLite connections stay in the thread that made them
        outcome["state"] = Controller(sdk.db(), job_id, backend=backend or KubernetesBackend(allow_local_store=True),
                                      poll_s=0.05).run()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return {"thread": thread, "outcome": outcome}
