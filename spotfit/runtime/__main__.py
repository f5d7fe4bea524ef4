"""`python -m spotfit.runtime JOB_URL ATTEMPT` (main.py); a hollow attempt with `SPOTFIT_HOLLOW=1` (hollow/)."""

import os

from spotfit.attempt.config import HOLLOW_ENV, HOLLOW_TRAINER
from spotfit.registry import load
from spotfit.runtime.main import main

if os.environ.get(HOLLOW_ENV, "0") not in ("", "0"):
    main(trainer=load(HOLLOW_TRAINER))
else:
    main()
