"""`python -m spotfit.controller JOB_ID`: a detached controller (what `spotfit run --detach` starts)."""

import sys

from spotfit.controller.loop import Controller
from spotfit.host.home import private_umask, state_target
from spotfit.state.db import StateDB


def main() -> None:
    private_umask()  # as the CLI that starts it: folders 0700, files 0600
    db = StateDB(state_target())
    Controller(db, sys.argv[1]).run()


main()
