"""`python -m spotfit.controller JOB_ID`: a detached controller (what `spotfit run --detach` starts)."""

import sys

from spotfit.controller.loop import Controller
from spotfit.home import state_target
from spotfit.state import StateDB


def main() -> None:
    db = StateDB(state_target())
    Controller(db, sys.argv[1]).run()


main()
