"""Notifications: a JSON POST to a webhook, with a Slack-compatible `text` field.

The target comes from the spec's `notify.webhook`, else from `$SPOTFIT_HOME/config.yaml`
(`notify: {webhook: URL}`). A failed delivery never stops the job: it returns the error, and
the controller records it as an event.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import yaml

from spotfit.home import home


def webhook_url(spec_webhook: str | None) -> str | None:
    """The webhook to use: the spec's, else the user config's, else none."""
    if spec_webhook:
        return spec_webhook
    path = home() / "config.yaml"
    if not path.is_file():
        return None
    config = yaml.safe_load(path.read_text()) or {}
    return ((config.get("notify") or {}).get("webhook")) or None


def rule_payload(job_id: str, verdict, message: str) -> dict:
    """The webhook's JSON for a rule that fired (Slack reads `text`; the rest is for programs)."""
    return {"text": f"spotfit job {job_id}: {message}", "job": job_id, "rule": verdict.rule,
            "action": verdict.action, "message": verdict.message, "saved_usd": verdict.saved_usd}


def send(url: str, payload: dict, timeout_s: float = 5.0) -> str | None:
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


def rule_fired(state_db, job_id: str, url: str | None, verdict, message: str) -> None:
    """Tell the job's webhook (if any) that a rule fired; a failed delivery is an event, never an error."""
    if url and (error := send(url, rule_payload(job_id, verdict, message))):
        state_db.add_event(job_id, "notify_failed", f"webhook delivery failed: {error}")
