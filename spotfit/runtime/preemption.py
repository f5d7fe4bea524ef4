"""Preemption notices: SIGTERM, and the cloud's spot interruption endpoint.

`NoticeWatcher` turns either source into one flag that the training loop checks after each
step. The endpoint (AWS: `/latest/meta-data/spot/instance-action`, which answers 404 until a
notice exists) is configurable so that tests point it at a loopback server; spotfit never
defaults to a metadata address on machines where it was not told to use one.
"""

from __future__ import annotations

import signal
import threading
import urllib.error
import urllib.parse
import urllib.request


class Preempted(SystemExit):
    """Raised out of `fit` after the notice checkpoint is saved; exits with `EXIT_PREEMPTED`.

    A `SystemExit` so that a script's `except Exception:` does not swallow it.
    """


class NoticeWatcher:
    """Sets `self.notice` when SIGTERM arrives or the metadata endpoint reports an interruption."""

    def __init__(self, metadata_url: str | None = None, poll_s: float = 5.0):
        self.notice = threading.Event()
        self.source: str | None = None
        self.in_training = False  # outside fit there is nothing to save: exit at once
        self._metadata_url = metadata_url
        self._poll_s = poll_s
        self._stop = threading.Event()

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._on_sigterm)
        if self._metadata_url:
            threading.Thread(target=self._poll, name="spotfit-notice", daemon=True).start()

    def close(self) -> None:
        self._stop.set()

    def _on_sigterm(self, signum, frame) -> None:
        self.source = self.source or "SIGTERM"
        self.notice.set()
        if not self.in_training:
            from spotfit.attempt.exit_codes import EXIT_PREEMPTED

            raise Preempted(EXIT_PREEMPTED)

    def _poll(self) -> None:
        while not self._stop.wait(self._poll_s):
            try:
                if self._interruption_noticed():
                    self.source = self.source or "metadata"
                    self.notice.set()
                    return
            except (urllib.error.URLError, OSError, ValueError):
                continue

    def _interruption_noticed(self) -> bool:
        """GET the notice endpoint, with an IMDSv2 session token when the server gives one."""
        assert self._metadata_url is not None, "only polled when a metadata URL was given"
        headers = {}
        token = _imds_token(self._metadata_url)
        if token:
            headers["X-aws-ec2-metadata-token"] = token
        request = urllib.request.Request(self._metadata_url, headers=headers)
        with urllib.request.urlopen(request, timeout=2) as resp:
            return resp.status == 200


def _imds_token(metadata_url: str) -> str | None:
    """An IMDSv2 token from the same server (`PUT /latest/api/token`), or None (IMDSv1, tests)."""
    parts = urllib.parse.urlsplit(metadata_url)
    url = urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/latest/api/token", "", ""))
    request = urllib.request.Request(url, method="PUT",
                                     headers={"X-aws-ec2-metadata-token-ttl-seconds": "21600"})
    try:
        with urllib.request.urlopen(request, timeout=2) as resp:
            return resp.read().decode().strip() or None
    except (urllib.error.URLError, OSError, ValueError):
        return None
