"""What every part of spotfit stands on, TensorFlow or not: checked arguments and settings read from the
environment (`arguments.py`), a package's names loaded on first use (`lazy.py`), the backends by name
(`registry.py`) and the crash points tests hold a process at (`crashpoints.py`). It imports nothing of
spotfit but `errors`."""
