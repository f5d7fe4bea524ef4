"""The runtime's exit codes: how an attempt tells the controller how it ended.

- `EXIT_DONE` (0): the script finished.
- `EXIT_STORE` (74, sysexits' EX_IOERR): the job's store failed the runtime (full, unreachable or
  refusing writes) where it cannot go on without it: reading its configuration, restoring, writing
  its result. The store's fault, not the script's: it does not count toward `max_failures`, and
  the next launch waits until the store answers the controller.
- `EXIT_PREEMPTED` (75): a preemption notice arrived; a checkpoint of the current step was saved.
- `EXIT_STOPPED` (76): stopped on request (a rule or `spotfit cancel`); a checkpoint was saved.
- `EXIT_CONFIG` (78, sysexits' EX_CONFIG): the job is misconfigured (a spotfit `UsageError`, e.g. a
  dataset over `data.cache_limit_gib`); a retry would fail the same way, so there is none.
- anything else: the script or the runtime failed.

These codes are the runtime's alone: a script that exits with one of them itself (`sys.exit(75)`)
is recorded as exiting 1, with a line in its log that says so, so that it never reads as a
preemption or a store failure (`RESERVED`).
"""

EXIT_DONE = 0
EXIT_STORE = 74
EXIT_PREEMPTED = 75
EXIT_STOPPED = 76
EXIT_CONFIG = 78
RESERVED = (EXIT_STORE, EXIT_PREEMPTED, EXIT_STOPPED, EXIT_CONFIG)
