"""spotfit on this host: where it keeps its state (`home.py`, `$SPOTFIT_HOME`), the user's or team's settings
file (`settings.py`, `config.yaml`), and where a job spec may make spotfit write (`confine.py`)."""
