"""Hollow attempts: a stand-in runtime that keeps the attempt's contract and imports no TensorFlow.

The controller, the ledger, the rules, the backends and the sweeps see an attempt only through
`spotfit.attempt`: `runtime.json` in; `progress.json`, `events/`, `checkpoints/<step>/`,
`result.json`, `exit.json` and the exit code out. A hollow attempt keeps exactly that contract
while its "model" is a small NumPy state (model.py) whose value after step *n* depends on every
batch it has seen, in order: a wrong resume step, a skipped or repeated batch, or a lost
checkpoint changes its final `weights_sha256`, as it would for real weights. Kubernetes tests
its control plane the same way (kubemark's hollow nodes: real API traffic, no containers).

It is started exactly as the real runtime is (`python -m spotfit.runtime JOB_URL N`, same
process group, same store prefix) and chosen by `SPOTFIT_HOLLOW=1` in the attempt's environment
(the spec's `env:`, or the environment the controller inherits). Everything around the training
(reading the config, the notice watcher, heartbeats, the stop poll, the data step, the result,
the exit record, ending like `python train.py`) is the real runtime's own code
(`spotfit.runtime.main.run` with the hollow trainer); only the script and Keras are replaced.

What it trains is the script's *scenario* (scenario.py): `hollow.json` beside the script, and
the flags of the test scripts (`--epochs`, `--wait-for-market-at`, `--pause-at`, ...) in the
job's `args`. The script itself never runs. tests/attempt/test_contract.py runs the same
scenarios on this runtime and the real one and asserts the same files, events, exit codes and
steps, so the two cannot drift apart unseen. docs/testing.md says which tests use which.
"""

from spotfit.attempt.config import HOLLOW_ENV as HOLLOW_ENV

SCENARIO_FILE = "hollow.json"
