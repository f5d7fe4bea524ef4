"""The controller: runs a job through attempts on a backend, guided by a spot policy."""
