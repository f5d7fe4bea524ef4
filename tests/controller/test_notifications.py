"""Notifications of job events (`spotfit/controller/notifications.py`) to real receivers on 127.0.0.1:
a Slack-format webhook, a generic JSON webhook, and SMTP with STARTTLS (aiosmtpd). No job trains: the
events are written to the state DB as the controller writes them."""

from __future__ import annotations

import datetime
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from aiosmtpd.controller import Controller as SmtpController
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from spotfit import sdk
from spotfit.controller.loop import Controller
from spotfit.controller.notifications import TRIES, Notifier
from spotfit.errors import SpecError
from spotfit.host.settings import Settings, load_settings
from spotfit.spec.job import JobSpec
from spotfit.spec.sinks import Sink
from spotfit.state.states import JobState
from tests.support.webhook import webhook_receiver


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _self_signed(folder) -> tuple[str, str]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(hours=1))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(__import__("ipaddress").ip_address(
                "127.0.0.1"))]), critical=False)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "smtp.crt", folder / "smtp.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return str(cert_path), str(key_path)


@pytest.fixture
def smtp(tmp_path) -> Iterator[tuple[dict, list]]:
    """An SMTP server on 127.0.0.1 that requires STARTTLS: (the `email:` sink settings, the mails received)."""
    cert, key = _self_signed(tmp_path)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    received: list = []

    class Handler:
        async def handle_DATA(self, server, session, envelope):
            received.append({"tls": session.ssl is not None, "to": envelope.rcpt_tos,
                             "content": envelope.content.decode()})
            return "250 OK"

    port = _free_port()
    server = SmtpController(Handler(), hostname="127.0.0.1", port=port, tls_context=context, require_starttls=True)
    server.start()
    try:
        yield {"to": ["ops@example.com"], "sender": "spotfit@example.com", "host": "127.0.0.1", "port": port,
               "ca_file": cert}, received
    finally:
        server.stop()


def _job(job_id: str = "nlp-1") -> None:
    spec = JobSpec.model_validate({"name": "nlp", "script": "t.py", "market": {"trace": None}})
    db = sdk.db()
    db.create_job(job_id, "nlp", spec.model_dump_json(), "memory://nlp")
    db.move_job(job_id, JobState.RUNNING, "set by the test")
    db.add_event(job_id, "launch", "attempt 1: spot in z", attempt=1)  # before the notifier: not news


def test_each_sink_gets_the_events_it_wants(smtp):
    mail, mails = smtp
    _job()
    db = sdk.db()
    with webhook_receiver() as (slack_url, slack), webhook_receiver() as (hook_url, hooks):
        sinks = Settings.model_validate({"notify": {"sinks": [
            {"slack": slack_url, "events": ["preempted", "paused"]},
            {"webhook": hook_url},
            {"email": mail, "events": ["stalled", "paused"]},
        ]}}).notify.sinks
        notifier = Notifier(db, "nlp-1", sinks)
        number = db.add_attempt("nlp-1", backend="local", zone="z", market="spot", state="preempted")
        db.update_attempt("nlp-1", number, billed_s=3600.0, cost_usd=1.5)
        db.add_event("nlp-1", "attempt_preempted", "attempt 1 preempted at step 40", attempt=1)
        db.add_event("nlp-1", "launch", "attempt 2: spot in z", attempt=2)
        db.add_event("nlp-1", "rule", "stalled: no step for 600 s -> pause", rule="stalled", index=0, action="pause")
        db.add_event("nlp-1", "team_budget", "team_budget: nlp spent ... -> notify", rule="team_budget")
        db.add_event("nlp-1", "rule", "plateau: val_loss flat -> notify", rule="plateau", index=1, action="notify")
        db.add_event("nlp-1", "checkpoint", "step 40 saved")  # not a notification
        db.move_job("nlp-1", JobState.PAUSED, "stalled: no step for 600 s -> pause")
        notifier.close(db.get_job("nlp-1"))
    assert [h["event"] for h in hooks] == ["preempted", "relaunched", "stalled", "budget", "rule", "paused"]
    first = hooks[0]
    assert first["job"] == "nlp-1" and first["cost_usd"] == 1.5 and first["look"] == "spotfit status nlp-1"
    assert first["text"] == ("spotfit preempted: job nlp (nlp-1): attempt 1 preempted at step 40; cost so far "
                             "$1.5000. Look: `spotfit status nlp-1`")
    assert [list(s) for s in slack] == [["text"], ["text"]]  # Slack's format: text only
    assert [s["text"].split(":")[0] for s in slack] == ["spotfit preempted", "spotfit paused"]
    assert [m["tls"] for m in mails] == [True, True] and mails[0]["to"] == ["ops@example.com"]
    assert "Subject: spotfit stalled: nlp (nlp-1)" in mails[0]["content"]
    assert "Subject: spotfit paused: nlp (nlp-1)" in mails[1]["content"]
    assert [e for e in db.events("nlp-1") if e["kind"] == "notify_failed"] == []


class _Refusing(BaseHTTPRequestHandler):
    hits = 0

    def do_POST(self):
        type(self).hits += 1
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_a_failed_delivery_is_tried_three_times_then_recorded(monkeypatch):
    monkeypatch.setenv("SPOTFIT_WAIT_SCALE", "0.001")
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _job()
    db = sdk.db()
    try:
        sink = Sink(webhook=f"http://127.0.0.1:{server.server_address[1]}/hook", events=["completed"])
        notifier = Notifier(db, "nlp-1", [sink])
        db.move_job("nlp-1", JobState.COMPLETED, "completed")
        notifier.close(db.get_job("nlp-1"))
    finally:
        server.shutdown()
        server.server_close()
    assert _Refusing.hits == TRIES
    [failed] = [e for e in db.events("nlp-1") if e["kind"] == "notify_failed"]
    assert failed["message"] == "webhook notification of `completed` to sink [0] (http://127.0.0.1:" \
        f"{server.server_address[1]}/h…/***) failed after 3 tries: HTTP Error 500: Internal Server Error"


def test_poll_never_waits_for_a_delivery():
    arrived, release = threading.Event(), threading.Event()

    class Slow(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            arrived.set()
            release.wait(60)
            self.send_response(200)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _job()
    db = sdk.db()
    try:
        notifier = Notifier(db, "nlp-1", [Sink(webhook=f"http://127.0.0.1:{server.server_address[1]}/h")])
        db.move_job("nlp-1", JobState.FAILED, "script failed")
        notifier.poll(db.get_job("nlp-1"))  # returns with the delivery queued
        assert arrived.wait(60)  # the delivery is held by the receiver, and poll has returned
        assert not release.is_set()
        release.set()
        notifier.close(db.get_job("nlp-1"))
    finally:
        release.set()
        server.shutdown()
        server.server_close()
    assert [e for e in db.events("nlp-1") if e["kind"] == "notify_failed"] == []


def test_the_controller_notifies_a_team_budget_pause(spotfit_home):
    with webhook_receiver() as (url, received):
        spotfit_home.mkdir(mode=0o700, exist_ok=True)
        (spotfit_home / "config.yaml").write_text(json.dumps({
            "notify": {"sinks": [{"webhook": url, "events": ["budget", "paused"]}]},
            "budgets": [{"name": "all", "usd": 1}]}))
        db = sdk.db()
        spent = JobSpec.model_validate({"name": "before", "script": "t.py", "market": {"trace": None}})
        db.create_job("before-1", "before", spent.model_dump_json(), "memory://b")
        db.update_attempt("before-1", db.add_attempt("before-1", backend="local", zone=None, market="on_demand",
                                                     state="completed"), billed_s=60.0, cost_usd=2.0)
        spec = JobSpec.model_validate({"name": "next", "script": "t.py", "market": {"trace": None}})
        db.create_job("next-1", "next", spec.model_dump_json(), "memory://n")
        Controller(sdk.db(), "next-1", backend=_NoLaunch(), poll_s=0.0).run()  # type: ignore[arg-type]
    assert [(r["event"], r["state"]) for r in received] == [("budget", "paused"), ("paused", "paused")]
    assert received[1]["message"].startswith("team_budget: all spent $2.0000 of $1 this month")


class _NoLaunch:
    name = "stand-in"
    runs_here = False

    def launch(self, request):
        raise AssertionError("launched past a team budget")


@pytest.mark.parametrize(("sink", "fragment"), [
    ({"slack": "https://h/x", "webhook": "https://h/y"}, "exactly one of `slack`, `webhook` or `email`"),
    ({"webhook": "https://h/y", "events": ["done"]}, "Invalid `notify.sinks[0].events[0]`"),
    ({"email": {"to": ["nobody"], "sender": "a@b", "host": "h"}}, "e-mail addresses"),
    ({"slack": "ftp://h/x"}, "an http(s):// URL"),
])
def test_bad_sinks_are_one_line(spotfit_home, sink, fragment):
    spotfit_home.mkdir(mode=0o700, exist_ok=True)
    (spotfit_home / "config.yaml").write_text(json.dumps({"notify": {"sinks": [sink]}}))
    with pytest.raises(SpecError, match=None) as err:
        load_settings()
    assert fragment in err.value.message


def test_a_broken_settings_file_is_called_a_settings_file(spotfit_home):
    spotfit_home.mkdir(mode=0o700, exist_ok=True)
    (spotfit_home / "config.yaml").write_text("notify: {}\nnotify: {}\n")
    with pytest.raises(SpecError) as err:
        load_settings()
    assert err.value.message.startswith(f"Settings file {spotfit_home / 'config.yaml'} names `notify` twice")


def test_a_webhook_url_with_credentials_is_refused_in_a_spec_as_in_the_settings(spotfit_home):
    with pytest.raises(ValueError, match="without credentials"):
        JobSpec.model_validate({"name": "w", "script": "t.py", "notify": {"webhook": "https://u:p@127.0.0.1:9/x"}})
    spotfit_home.mkdir(mode=0o700, exist_ok=True)
    (spotfit_home / "config.yaml").write_text(json.dumps({"notify": {"sinks": [{"webhook": "https://u:p@127.0.0.1:9/x"}]}}))
    with pytest.raises(SpecError, match="without credentials"):
        load_settings()


def test_a_jobs_own_sinks_take_their_url_from_the_controllers_environment(monkeypatch, spotfit_home):
    monkeypatch.setenv("SPOTFIT_WAIT_SCALE", "0.001")
    with webhook_receiver() as (url, received):
        monkeypatch.setenv("TEAM_HOOK", url)
        spec = JobSpec.model_validate({"name": "own", "script": "t.py", "market": {"trace": None}, "notify": {
            "sinks": [{"webhook": {"secret": "TEAM_HOOK"}, "events": ["paused"]},
                      {"slack": {"secret": "UNSET_HOOK"}, "events": ["paused"]}]}})
        assert url not in spec.model_dump_json() and "127.0.0.1" not in spec.model_dump_json()  # names only
        spotfit_home.mkdir(mode=0o700, exist_ok=True)
        (spotfit_home / "config.yaml").write_text(json.dumps({"budgets": [{"name": "all", "usd": 1}]}))
        db = sdk.db()
        db.create_job("before-1", "before", spec.model_dump_json(), "memory://b")
        db.update_attempt("before-1", db.add_attempt("before-1", backend="local", zone=None, market="on_demand",
                                                     state="completed"), billed_s=60.0, cost_usd=2.0)
        db.create_job("own-1", "own", spec.model_dump_json(), "memory://o")
        Controller(sdk.db(), "own-1", backend=_NoLaunch(), poll_s=0.0).run()  # type: ignore[arg-type]
    assert [(r["event"], r["job"]) for r in received] == [("paused", "own-1")]
    [failed] = [e["message"] for e in sdk.events("own-1") if e["kind"] == "notify_failed"]
    assert failed == "slack notification of `paused` to sink [1] ({secret: UNSET_HOOK}) failed after 3 tries: " \
                     "`UNSET_HOOK` is not set in the controller's environment"  # which of the sinks, by name


@pytest.mark.parametrize(("notify", "fragment"), [
    ({"sinks": [{"slack": "https://hooks.slack.com/services/T/B/x"}]}, "expected {secret: NAME}"),
    ({"sinks": [{"webhook": {"secret": "A"}, "slack": {"secret": "B"}}]}, "exactly one of"),
    ({"sinks": [{"webhook": {"secret": "not a name"}}]}, "an environment variable name"),
])
def test_bad_sinks_in_a_spec_are_one_line(notify, fragment):
    from spotfit.spec.job import parse_spec

    with pytest.raises(SpecError) as err:
        parse_spec({"name": "a", "script": "t.py", "notify": notify}, source="job.yaml")
    assert fragment in err.value.message and err.value.message.startswith("Invalid `notify.sinks")
