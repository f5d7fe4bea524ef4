"""Every shell example of README.md and docs/*.md runs against a fresh SPOTFIT_HOME.

One test per block, named by file and line. A block marked `<!-- not-tested: REASON -->` is
reported as skipped with its reason (`pytest -rs` lists them); `<!-- doc-test: slow -->`
blocks train, and run with the slow tests. See markdown_blocks.py for the markers and
shell_session.py for how a block runs and what is compared.
"""

from __future__ import annotations

import pytest

from tests.docs.markdown_blocks import all_blocks, doc_files, parse_blocks
from tests.docs.shell_session import HOME, REPO, run_block

_BLOCKS = all_blocks(REPO)
_SHELL = [b for b in _BLOCKS if b.is_shell]


def _param(block):
    marks = [pytest.mark.slow] if block.slow else []
    return pytest.param(block, id=block.where, marks=marks)


@pytest.mark.parametrize("block", [_param(b) for b in _SHELL])
def test_shell_example(block, tmp_path, monkeypatch):
    if block.not_tested:
        pytest.skip(f"{block.where} not tested: {block.not_tested}")
    # The example's jobs live in its sandbox's home (shell_session.sandbox): pointed at it, a
    # failing example's report (tests/support/job_report.py) shows their status, events and logs.
    monkeypatch.setenv("SPOTFIT_HOME", str(tmp_path / "work" / HOME))
    files = {b.file: b.text for b in _BLOCKS if b.path == block.path and b.file}
    run_block(block, tmp_path / "work", files, timeout_s=900 if block.slow else 300)


def test_markers_only_on_blocks_they_can_apply_to():
    """`not-tested`, `slow` and `setup` mark shell examples; `file` marks the blocks it writes out."""
    for block in _BLOCKS:
        if block.is_shell:
            assert block.file is None, f"{block.where}: a shell example cannot be a `doc-test: file`"
        else:
            assert not (block.not_tested or block.slow or block.setup or block.teardown), (
                f"{block.where}: a `{block.lang or 'plain'}` block is never run; drop its marker")


def test_every_doc_is_collected():
    """The collector reads README.md and every docs/*.md, and finds the examples they hold."""
    assert {p.name for p in doc_files(REPO)} >= {"README.md", "job-spec.md", "aws.md", "storage.md"}
    assert sum(len(parse_blocks(str(p), p.read_text())) for p in doc_files(REPO)) == len(_BLOCKS)
    untested = [b for b in _SHELL if b.not_tested]
    assert len(untested) < len(_SHELL), "every shell example is marked not-tested"
