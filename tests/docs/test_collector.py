"""The doc-test collector itself: a wrong output, a failing command or an unknown marker fails."""

from __future__ import annotations

import pytest

from tests.docs.markdown_blocks import Block, MarkerError, parse_blocks
from tests.docs.shell_session import run_block


def _run(tmp_path, lang: str, text: str, **markers) -> None:
    run_block(Block("t.md", 1, lang, text, **markers), tmp_path / "work", {}, timeout_s=60)


def test_console_output_shown_is_compared(tmp_path):
    _run(tmp_path, "console", "$ echo hello   world\nhello world\n$ printf 'a\\nb\\n'\na ...\n")
    with pytest.raises(AssertionError, match="printed"):
        _run(tmp_path / "2", "console", "$ echo hello\ngoodbye\n")


def test_a_console_command_without_output_shown_must_succeed(tmp_path):
    _run(tmp_path, "console", "$ false\n$ echo $?\n1\n")  # a failure the doc shows is fine
    with pytest.raises(AssertionError, match="exited 1"):
        _run(tmp_path / "2", "console", "$ false\n")


def test_a_bash_block_fails_on_its_first_failing_command(tmp_path):
    with pytest.raises(AssertionError, match="exit 3"):
        _run(tmp_path, "bash", "true\n(exit 3)\necho never\n")


def test_setup_and_teardown_run_around_the_block(tmp_path):
    _run(tmp_path, "console", "$ cat made\nmade by setup\n", setup=["echo made by setup > made"],
         teardown=["echo torn down > ../teardown-ran"])
    assert (tmp_path / "teardown-ran").read_text() == "torn down\n"


def test_the_example_sees_a_fresh_home_and_the_checkout_s_spotfit(tmp_path, monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "leaked")
    _run(tmp_path, "console", '$ echo "$SPOTFIT_HOME" "${AWS_ACCESS_KEY_ID:-none}"\n.../work/spotfit-home none\n'
         "$ spotfit list --json\n[]\n")


def test_unknown_markers_are_errors():
    with pytest.raises(MarkerError, match="unknown marker"):
        parse_blocks("t.md", "<!-- doc-test: slwo -->\n```bash\ntrue\n```\n")
    with pytest.raises(MarkerError, match="needs a reason"):
        parse_blocks("t.md", "<!-- not-tested: -->\n```bash\ntrue\n```\n")


def test_a_marker_applies_only_to_the_block_right_below():
    blocks = parse_blocks("t.md", "<!-- doc-test: slow -->\n\ntext between\n\n```bash\ntrue\n```\n")
    assert not blocks[0].slow
