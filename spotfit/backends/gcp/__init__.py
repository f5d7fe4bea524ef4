"""The Google Cloud backend: spot VMs on Compute Engine (google-cloud-compute, the `gcp` extra).

Imported lazily by the backend registry. Modules: `backend` (the Backend: launch, status,
preempt, stop, live prices), `launch` (the exact `instances.insert` bodies, pure), `machines`
(machine type and GPUs from `resources`), `spec` (the `gcp:` section), `client` (the one
importer of the Compute SDK), `handle`, `startup` (the VM's startup script), `agent` (runs on
the VM: the metadata server's preemption notice), `prices` (Billing Catalog and bundled
prices), `preflight`, `dryrun`. See docs/gcp.md.
"""
