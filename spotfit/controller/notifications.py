"""Notifications of what happens to a job, to the sinks of the settings file and of its spec (`notify.sinks`).

Each pass of the controller's loop, `Notifier.poll` reads the job's new events and its state,
turns them into notification events (`event_of`, `state_event`: pure), and queues one message
per sink that wants the event. A thread of its own delivers them: a Slack-format POST
(`{text}`), a generic JSON POST (the whole message) or a mail over SMTP with STARTTLS. A
delivery is tried `TRIES` times with a doubling wait (`SPOTFIT_WAIT_SCALE` scales it); after the
last it is a `notify_failed` event, which the next `poll` records. The loop never waits for a
delivery, except at the end (`close`), for at most `CLOSE_WAIT_S`, so that "completed" leaves
with the job.

| event | when |
|---|---|
| completed, failed, paused | the job enters that state |
| preempted | an attempt ended preempted (the market reclaimed it) |
| relaunched | an attempt after the first was launched |
| budget | the job's budget or a team budget fired |
| stalled | the `stalled` rule fired |
| rule | any other rule fired |

Example:

>>> event_of({"kind": "rule", "data": {"rule": "stalled"}}), event_of({"kind": "launch", "attempt": 2})
('stalled', 'relaunched')
>>> event_of({"kind": "launch", "attempt": 1}) is None, state_event("running", "completed")
(True, 'completed')
"""

from __future__ import annotations

import json
import os
import queue
import smtplib
import ssl
import threading
import time
import urllib.request
from email.message import EmailMessage
from typing import TYPE_CHECKING, Any

from spotfit.controller import waits
from spotfit.state.records import JobRecord
from spotfit.state.states import JobState

if TYPE_CHECKING:
    from spotfit.spec.sinks import Sink

TRIES = 3
FIRST_WAIT_S = 1.0  # between tries, doubled each time
CLOSE_WAIT_S = 30.0
TIMEOUT_S = 10.0
_STATE_EVENTS = {JobState.COMPLETED: "completed", JobState.FAILED: "failed", JobState.PAUSED: "paused"}


def event_of(event: dict[str, Any]) -> str | None:
    """The notification event a state DB event is, or None."""
    kind, data = event["kind"], event.get("data") or {}
    if kind == "attempt_preempted":
        return "preempted"
    if kind == "launch" and (event.get("attempt") or 1) > 1:
        return "relaunched"
    if kind in ("budget_limit", "team_budget") or (kind == "rule" and data.get("rule") == "budget"):
        return "budget"
    if kind == "rule":
        return "stalled" if data.get("rule") == "stalled" else "rule"
    return None


def state_event(before: str, now: str) -> str | None:
    """`completed`, `failed` or `paused` when the job entered that state."""
    return _STATE_EVENTS.get(JobState(now)) if now != before else None


def message(event: str, job: JobRecord, what: str, cost_usd: float) -> dict[str, Any]:
    """What every sink gets: what happened, the job, its cost so far and the command to look."""
    look = f"spotfit status {job['id']}"
    return {"text": f"spotfit {event}: job {job['name']} ({job['id']}): {what}; cost so far ${cost_usd:.4f}. "
                    f"Look: `{look}`",
            "event": event, "job": job["id"], "name": job["name"], "state": job["state"], "message": what,
            "cost_usd": round(cost_usd, 6), "look": look}


def send(sink: Any, doc: dict[str, Any]) -> None:
    """Deliver `doc` to `sink` (a `spec.sinks.Sink`) once; raises on failure."""
    if sink.email is not None:
        _mail(sink.email, doc)
        return
    body = {"text": doc["text"]} if sink.slack is not None else doc
    request = urllib.request.Request(sink.url(os.environ), data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:
        if answer.status >= 300:
            raise OSError(f"HTTP {answer.status}")


def _mail(email: Any, doc: dict[str, Any]) -> None:
    mail = EmailMessage()
    mail["Subject"] = f"spotfit {doc['event']}: {doc['name']} ({doc['job']})"
    mail["From"], mail["To"] = email.sender, ", ".join(email.to)
    mail.set_content(doc["text"] + "\n")
    with smtplib.SMTP(email.host, email.port, timeout=TIMEOUT_S) as smtp:
        if email.starttls:
            smtp.starttls(context=ssl.create_default_context(cafile=email.ca_file))
        if email.user:
            smtp.login(email.user, os.environ.get(email.password_env or "", ""))
        smtp.send_message(mail)


def target(sink: Any) -> str:
    """Where `sink` sends, as an event may say it: a secret's name, a redacted URL, mail's recipients and server.

    >>> from spotfit.spec.sinks import Sink
    >>> target(Sink(webhook="https://hooks.example.com/services/T0001/B0002/XXXX"))
    'https://hooks.example.com/services/T…/***'
    """
    from spotfit.spec.rules import redact_url

    if sink.email is not None:
        return f"to {', '.join(sink.email.to)} via {sink.email.host}"
    value = sink.slack or sink.webhook
    return f"{{secret: {value.secret}}}" if hasattr(value, "secret") else redact_url(str(value))


class Notifier:
    """The job's notifications: `poll` each pass (never waits), `close` at the end."""

    def __init__(self, db: Any, job_id: str, sinks: list[Sink]):
        self.db, self.job_id, self.sinks = db, job_id, sinks
        events = db.events(job_id) if sinks else []
        self.after_id = events[-1]["id"] if events else 0  # what happened before this controller is not news
        self.state = db.get_job(job_id)["state"]
        self.outbox: queue.Queue[tuple[Sink, dict[str, Any]]] = queue.Queue()
        self.failures: queue.Queue[tuple[str, Any, str]] = queue.Queue()  # (event, sink, error)
        self.thread: threading.Thread | None = None

    def poll(self, job: JobRecord) -> None:
        """Queue the notifications of what happened since the last poll; record failed deliveries."""
        while not self.failures.empty():
            event, sink, error = self.failures.get()
            index = next(i for i, s in enumerate(self.sinks) if s is sink)
            self.db.add_event(self.job_id, "notify_failed", f"{sink.kind} notification of `{event}` to sink [{index}] "
                                                            f"({target(sink)}) failed after {TRIES} tries: {error}",
                              sink=sink.kind, sink_index=index, event=event)
        if not self.sinks:
            return
        news = []
        for e in self.db.events(self.job_id, self.after_id):
            self.after_id = e["id"]
            if (name := event_of(e)) is not None:
                news.append((name, e["message"]))
        if (name := state_event(self.state, job["state"])) is not None:
            news.append((name, job["message"] or job["state"]))
        self.state = job["state"]
        if not news:
            return
        cost = sum(a["cost_usd"] or 0.0 for a in self.db.attempts(self.job_id))
        for name, what in news:
            for sink in self.sinks:
                if name in sink.events:
                    self._queue(sink, message(name, job, what, cost))

    def _queue(self, sink: Any, doc: dict[str, Any]) -> None:
        self.outbox.put((sink, doc))
        if self.thread is None:
            self.thread = threading.Thread(target=self._deliver, name=f"notify-{self.job_id}", daemon=True)
            self.thread.start()

    def _deliver(self) -> None:
        while True:
            sink, doc = self.outbox.get()
            wait_s = waits.scaled(FIRST_WAIT_S)
            for attempt in range(1, TRIES + 1):
                try:
                    send(sink, doc)
                    break
                except Exception as exc:  # noqa: BLE001  (any failure of a sink is its delivery's, never the thread's end)
                    if attempt == TRIES:
                        self.failures.put((doc["event"], sink, " ".join(str(exc).split()) or type(exc).__name__))
                    else:
                        time.sleep(wait_s)
                        wait_s *= 2
            self.outbox.task_done()

    def close(self, job: JobRecord) -> None:
        """The last poll, then wait (at most `CLOSE_WAIT_S`) for the deliveries, and record their failures."""
        self.poll(job)
        with self.outbox.all_tasks_done:
            self.outbox.all_tasks_done.wait_for(lambda: not self.outbox.unfinished_tasks, timeout=CLOSE_WAIT_S)
        self.poll(job)
