"""The runtime's exit codes: how an attempt tells the controller how it ended.

- `EXIT_DONE` (0): the script finished.
- `EXIT_PREEMPTED` (75): a preemption notice arrived; a checkpoint of the current step was saved.
- `EXIT_STOPPED` (76): stopped on request (a rule or `spotfit cancel`); a checkpoint was saved.
- `EXIT_CONFIG` (78, sysexits' EX_CONFIG): the job is misconfigured (a spotfit `UsageError`, e.g. a
  dataset over `data.cache_limit_gib`); a retry would fail the same way, so there is none.
- anything else: the script or the runtime failed.
"""

EXIT_DONE = 0
EXIT_PREEMPTED = 75
EXIT_STOPPED = 76
EXIT_CONFIG = 78
