"""`python -m spotfit.runtime JOB_URL ATTEMPT` (main.py); a hollow attempt with `SPOTFIT_HOLLOW=1` (hollow/).

Everything, imports included, runs on a deep stack (deep_stack.py): importing TensorFlow and tracing the
script's model otherwise map and unmap a frame chunk tens of thousands of times.
"""

import os

from spotfit.runtime.deep_stack import on_a_deep_stack


def _start() -> None:
    from spotfit.attempt.config import HOLLOW_ENV, HOLLOW_TRAINER
    from spotfit.core.registry import load
    from spotfit.runtime.main import main

    if os.environ.get(HOLLOW_ENV, "0") not in ("", "0"):
        main(trainer=load(HOLLOW_TRAINER))
    else:
        main()


on_a_deep_stack(_start)
