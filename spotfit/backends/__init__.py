"""Where attempts run: `base.py` (the contract and the registry), local, aws, gcp, kubernetes.

A regular package (not a namespace one), so that pytest's doctest collection imports
`spotfit.backends.kubernetes` by its full name and never puts this folder on `sys.path`,
where `kubernetes/` would hide the official `kubernetes` client.
"""
