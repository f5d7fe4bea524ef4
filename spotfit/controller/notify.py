"""Notifications: a JSON POST to a webhook, with a Slack-compatible `text` field.

The target comes from the spec's `notify.webhook`, else from `$SPOTFIT_HOME/config.yaml`
(`notify: {webhook: URL}`). The spec's webhook is a secret: `{secret: NAME}` is read from the
controller's environment; a literal URL is stored redacted, and reaches the controller only in
the environment it inherits from `spotfit run` (`job_secrets.keep_webhook`), which it moves into
its memory (`webhook_for`), so that no attempt inherits it. A failed delivery never stops the
job: it returns the error, and the controller records it as an event.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any, cast

import yaml

from spotfit.host.home import home

if TYPE_CHECKING:
    from spotfit.controller.rules import Verdict
    from spotfit.controller.team_budget import Crossing
    from spotfit.spec.rules import Notify
    from spotfit.spec.sinks import Sink
    from spotfit.state.db import StateDB

_kept: dict[str, str] = {}  # job id -> its literal webhook URL, taken out of the environment


def webhook_for(state_db: StateDB, job_id: str, spec_notify: Notify | None) -> str | None:
    """The job's webhook: the spec's (named secret or literal kept in memory), else the user config's, else none.

    A webhook the spec names but this controller cannot get is an event, once per controller start.
    """
    from spotfit.controller.job_secrets import webhook_env
    from spotfit.spec.rules import is_redacted

    if (url := os.environ.pop(webhook_env(job_id), None)) is not None:
        _kept[job_id] = url
    webhook = spec_notify.webhook if spec_notify is not None else None
    if spec_notify is None or webhook is None:
        return webhook_url(None)
    if (name := spec_notify.webhook_secret) is not None:
        found = os.environ.get(name)
        why = f"`{name}` is not set in the controller's environment"
    else:
        literal = cast(str, webhook)  # a webhook without a secret name is a URL
        found = _kept.get(job_id) or (None if is_redacted(literal) else literal)  # a job recorded before redaction
        why = "the URL given literally in the spec is kept only in the memory of the shell that started the job"
    if found is None:
        state_db.add_event(job_id, "notify_unavailable", f"no webhook for this controller: {why}",
                           hint="Give it as `notify: {webhook: {secret: NAME}}` and resume the job from a shell "
                                "where NAME is set.")
    return found


def sinks() -> list[Sink]:
    """The settings file's notification sinks (`notify.sinks`); none when it cannot be read.

    A broken settings file pauses the job at its next launch (`rule_actions`), with the error.
    """
    from spotfit.errors import SpotfitError
    from spotfit.host.settings import load_settings

    try:
        return list(load_settings().notify.sinks)
    except SpotfitError:
        return []


def webhook_url(spec_webhook: str | None) -> str | None:
    """The webhook to use: `spec_webhook`, else the user config's, else none."""
    if spec_webhook:
        return spec_webhook
    path = home() / "config.yaml"
    if not path.is_file():
        return None
    config = yaml.safe_load(path.read_text()) or {}
    return ((config.get("notify") or {}).get("webhook")) or None


def rule_payload(job_id: str, verdict: Verdict, message: str) -> dict[str, Any]:
    """The webhook's JSON for a rule that fired (Slack reads `text`; the rest is for programs)."""
    return {"text": f"spotfit job {job_id}: {message}", "job": job_id, "rule": verdict.rule,
            "action": verdict.action, "message": verdict.message, "saved_usd": verdict.saved_usd}


def send(url: str, payload: dict[str, Any], timeout_s: float = 5.0) -> str | None:
    """POST `payload` as JSON; returns None on success or the error as one line."""
    request = urllib.request.Request(
        url, data=json.dumps(payload).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as resp:
            if resp.status >= 300:
                return f"HTTP {resp.status}"
    except (urllib.error.URLError, OSError, ValueError) as exc:
        return str(exc)
    return None


def rule_fired(state_db: StateDB, job_id: str, url: str | None, verdict: Verdict, message: str) -> None:
    """Tell the job's webhook (if any) that a rule fired; a failed delivery is an event, never an error."""
    if url and (error := send(url, rule_payload(job_id, verdict, message))):
        state_db.add_event(job_id, "notify_failed", f"webhook delivery failed: {error}")


_WINDOW = {"day": "1d", "week": "7d", "month": "31d"}  # `cost --all --since` covering a budget's period


def team_budget(state_db: StateDB, job_id: str, url: str | None, crossing: Crossing) -> None:
    """Tell the webhook (if any) that a job's launch passed a budget over many jobs (`team_budget.Crossing`)."""
    payload = {"text": f"spotfit job {job_id}: {crossing.message}", "job": job_id, "rule": "team_budget",
               "budget": crossing.budget.name, "percent": crossing.percent, "action": crossing.action,
               "spent_usd": round(crossing.spent_usd, 6), "usd": crossing.budget.usd,
               "look": f"spotfit budget list; spotfit cost --all --since {_WINDOW[crossing.budget.period]} --by "
                       f"{next(iter(crossing.budget.labels), 'project')}"}
    if url and (error := send(url, payload)):
        state_db.add_event(job_id, "notify_failed", f"webhook delivery failed: {error}")
