"""`python -m spotfit.sweep SWEEP_ID`: a detached sweep controller (`spotfit sweep --detach`)."""

import sys

from spotfit.sweep.api import run

if __name__ == "__main__":
    run(sys.argv[1])
