"""The Google Cloud backend: spot VMs on Compute Engine (google-cloud-compute, the `gcp` extra).

Imported lazily by the backend registry. Modules: `backend` (the Backend: launch, status,
preempt, stop), `launch` (the exact `instances.insert` bodies, pure), `machines` (machine type
and GPUs from `resources`), `spec` (the `gcp:` section), `client` (the one importer of the
SDK), `handle`, `dryrun`, `prices` (bundled and live prices). See docs/gcp.md.
"""
