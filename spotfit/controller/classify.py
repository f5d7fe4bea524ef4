"""Which failures a retry can mend: configuration errors end the job at once, unbilled.

A job whose spec can never run (an unknown or offline `market.policy`, a trace, zone or start
that does not exist, a script that is gone, a dataset larger than `data.cache_limit_gib`) would
fail the same way on every retry, and each retry is billed. `preflight` finds these before the
first launch, in the controller, where nothing is billed yet; the runtime reports the ones only
it can see with its own exit code (`EXIT_CONFIG`), and the controller does not retry those.

The market's own errors name the flags of `spotfit simulate` (`--trace`, `--policy`); a job is
fixed in its spec, so `preflight` says which field to change instead.

Example:

>>> from spotfit.spec.job import JobSpec
>>> spec = JobSpec.model_validate({"name": "t", "script": "train.py", "market": {"policy": "optimum"}})
>>> try:
...     check_policy(spec)
... except ConfigError as err:
...     print(err.hint)  # doctest: +NORMALIZE_WHITESPACE
Set `market.policy:` to one of default, greedy, greedy_first, mdp, on_demand, rollout, spotfit,
uniform_progress, uniform_progress_first, or leave it out.
"""

from __future__ import annotations

from spotfit.attempt.exit_codes import EXIT_CONFIG
from spotfit.controller.job_secrets import check_present
from spotfit.errors import SpotfitError, StoreError, TraceError, UsageError
from spotfit.market.policies.base import ALIASES, POLICIES, make_policy
from spotfit.market.trace import resolve_trace
from spotfit.script import scriptcheck
from spotfit.spec.job import JobSpec
from spotfit.state.db import StateDB

__all__ = ["EXIT_CONFIG", "ConfigError", "check_script", "preflight"]


class ConfigError(UsageError):
    """The job cannot run as configured; retrying would fail the same way (exit 2)."""


def online_policies() -> list[str]:
    """Policy names a running job can use: every registered one but the offline `optimum`."""
    return sorted(n for n in [*POLICIES, *ALIASES] if not getattr(make_policy(n), "offline", False))


def check_policy(spec: JobSpec) -> None:
    """`market.policy` names a policy that decides online (the controller asks it every tick)."""
    name = spec.market.policy
    hint = f"Set `market.policy:` to one of {', '.join(online_policies())}, or leave it out."
    try:
        policy = make_policy(name)
    except UsageError as exc:
        raise ConfigError(f"Invalid `market.policy`: {exc.message}", hint=hint) from exc
    if getattr(policy, "offline", False):  # a class attribute of the offline policies (optimum)
        raise ConfigError(
            f"Invalid `market.policy`: received {name!r}, an offline policy that needs the whole trace in "
            f"advance; a job asks its policy online, so it cannot run with it (`spotfit simulate` can).",
            hint=hint,
        )


def check_trace(spec: JobSpec) -> None:
    """`market.trace` names a file or a bundled trace."""
    if not spec.market.trace:
        return
    try:
        resolve_trace(spec.market.trace)
    except TraceError as exc:
        raise ConfigError(f"Invalid `market.trace`: {exc.message}",
                          hint="Set `market.trace: aws-v100` (the bundled trace) or the path of a trace CSV.") from exc


def check_script(spec: JobSpec, local: bool) -> None:
    """The script still exists where a local attempt will run it, still compiles (it may have been
    edited since the job was submitted), and so do its secrets (the environment)."""
    if local and not spec.is_notebook and not spec.script_path.is_file():
        raise ConfigError(f"Invalid `script`: {str(spec.script_path)!r} no longer exists.",
                          hint="Put the script back, or fix `script:` and run the job again.")
    if local and not spec.is_notebook:
        try:
            scriptcheck.check_syntax(spec.script_path, spec.script)
        except UsageError as exc:
            raise ConfigError(exc.message, hint="Fix the syntax error, then `spotfit run` the job again.") from exc
    if local:
        try:
            check_present(spec.secrets)
        except UsageError as exc:
            raise ConfigError(exc.message, hint=exc.hint) from exc


def check_dataset(spec: JobSpec) -> None:
    """`data.source` fits in `data.cache_limit_gib` (a store that cannot be read is checked by the runtime)."""
    if spec.data is None or not spec.data.source or not spec.data.cache_limit_gib:
        return
    from spotfit.stores import open_store

    try:
        need = sum(i.size for i in open_store(spec.data.source).list_info())
    except SpotfitError as exc:  # unreachable now: the runtime's own check still applies
        if isinstance(exc, StoreError):
            return
        raise
    limit = int(spec.data.cache_limit_gib * 2**30)
    if need > limit:
        raise ConfigError(
            f"Invalid `data.cache_limit_gib`: the dataset {spec.data.source} holds {need / 2**30:.3g} GiB, more "
            f"than the limit {spec.data.cache_limit_gib:g} GiB.",
            hint="Raise `data.cache_limit_gib` in the job spec, or point `data.cache_dir` at a larger disk.",
        )


def preflight(spec: JobSpec) -> None:
    """Raise `ConfigError` for what would make every attempt of the job fail (`check_script` is
    the controller's before each launch: a script can go away between two)."""
    check_policy(spec)
    check_trace(spec)
    check_dataset(spec)


def as_config_error(exc: UsageError) -> ConfigError:
    """A spec error met while building the job's market replay (a zone or start not in the trace)."""
    if isinstance(exc, ConfigError):
        return exc
    return ConfigError(exc.message, hint=exc.hint or "Fix the `market:` section of the job spec.")


def runtime_config_error(db: StateDB, job_id: str, number: int) -> ConfigError:
    """The configuration error attempt `number`'s runtime reported (its `failed` event)."""
    failed = [e for e in db.events(job_id) if e["kind"] == "failed" and e["attempt"] == number]
    if not failed:
        return ConfigError(f"attempt {number} found a configuration error", hint=f"See `spotfit logs {job_id}`.")
    return ConfigError(failed[-1]["message"], hint=failed[-1]["data"].get("hint"))
