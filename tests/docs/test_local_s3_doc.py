"""docs/local-s3.md starts SeaweedFS with the flags the tests use (tests/support/seaweed.py)."""

from __future__ import annotations

import shlex

from tests.docs.markdown_blocks import parse_blocks
from tests.docs.shell_session import REPO
from tests.support.seaweed import SeaweedServer

_DOC = REPO / "docs" / "local-s3.md"


def _flags(words: list[str]) -> dict[str, str]:
    return dict(w[1:].split("=", 1) for w in words if w.startswith("-") and "=" in w)


def test_the_doc_starts_weed_mini_as_the_tests_do(tmp_path):
    blocks = [b for b in parse_blocks(str(_DOC), _DOC.read_text()) if b.is_shell and "weed mini" in b.text]
    assert len(blocks) == 1, "docs/local-s3.md should start `weed mini` in one shell example"
    line = blocks[0].text.replace("\\\n", " ").split("weed mini", 1)[1].split("\n", 1)[0]
    doc = _flags(shlex.split(line, comments=True))
    tests = _flags(SeaweedServer(tmp_path, binary="weed").command()[2:])
    # Ports and paths differ (the tests pick free ports and temporary folders); every other flag
    # (loopback binding, no telemetry, no WebDAV or admin UI, no Iceberg or Lance ports) must match.
    fixed = {k: v for k, v in tests.items() if not (k.endswith("port") or k.endswith(".grpc") or
                                                     k in ("dir", "s3.config"))}
    assert {k: doc.get(k) for k in fixed} == fixed
    assert doc["ip.bind"] == "127.0.0.1" and doc["ip"] == "127.0.0.1"
