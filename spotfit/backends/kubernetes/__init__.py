"""The `kubernetes` backend: each attempt is a Job (or a TFJob) on a spot or on-demand node pool.

`client.py` is the one place that imports the `kubernetes` client (lazily, from the
`kubernetes` extra); `manifests.py` and `profiles.py` build the objects (pure, printed by
`--dry-run`, validated against the Kubernetes OpenAPI schemas in the tests); `podstatus.py`
reads an attempt's outcome from its pods; `pod.py` runs inside the pod. See docs/kubernetes.md.
"""
