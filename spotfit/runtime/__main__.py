"""`python -m spotfit.runtime JOB_URL ATTEMPT` (main.py); a hollow attempt with `SPOTFIT_HOLLOW=1` (hollow/)."""

import os

from spotfit.hollow import HOLLOW_ENV
from spotfit.runtime.main import main

if os.environ.get(HOLLOW_ENV, "0") not in ("", "0"):
    from spotfit.hollow.trainer import train

    main(trainer=train)
else:
    main()
