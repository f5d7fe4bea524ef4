"""Sweeps: Optuna trials run as spotfit jobs, pruned on their epochs' metrics, resumed by ASHA.

`spec` (the sweep file), `trials` (a trial's job spec), `study` (the Optuna adaptor), `asha`
(rung decisions), `store` (sweeps, trials, batches), `runner` (the sweep controller),
`report` (leaderboard, comparison page, best model) and `api` (what the CLI calls).
"""
