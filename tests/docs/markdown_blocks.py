"""The shell examples of the docs: fenced blocks of README.md and docs/*.md, with their markers.

A fenced block is a shell example when its language is `bash`, `sh`, `shell` or `console`.
HTML comments right above a block (invisible on GitHub) say how the doc test treats it:

- `<!-- not-tested: REASON -->`: the block is not run (it needs AWS, a GPU, kubectl, or it
  installs or starts something); the test reports it as skipped with REASON, so skipping is
  visible and deliberate.
- `<!-- doc-test: slow -->`: the block trains a model; it is marked `slow` (`make check` skips it).
- `<!-- doc-test: file NAME -->` above any block (YAML, Python, ...): its text is written to
  NAME in the work folder before the shell examples of the same document run.
- `<!-- doc-test: setup COMMAND -->`: a shell command run, unseen, before the block.
- `<!-- doc-test: teardown COMMAND -->`: a shell command run when the block ends, even when it
  fails (stopping a server the block started, by the PID the block recorded).

Parsing uses markdown-it-py (rich's Markdown parser), so a fence inside a list or a quote is
found as GitHub would render it.

>>> blocks = parse_blocks("t.md", "<!-- not-tested: needs AWS -->\\n```bash\\naws s3 ls\\n```\\n")
>>> blocks[0].lang, blocks[0].not_tested, blocks[0].line
('bash', 'needs AWS', 2)
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from markdown_it import MarkdownIt

SHELL_LANGS = ("bash", "sh", "shell", "console")
_COMMENT = re.compile(r"<!--\s*(.*?)\s*-->", re.S)
_DIRECTIVES = ("slow", "file", "setup", "teardown")


class MarkerError(ValueError):
    """A doc-test marker the collector does not know: a typo would silently skip or run a block."""


@dataclass
class Block:
    """One fenced block: where it is, its language, its text and what its markers say."""

    path: str
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    not_tested: str | None = None
    slow: bool = False
    file: str | None = None
    setup: list[str] = field(default_factory=list)
    teardown: list[str] = field(default_factory=list)

    @property
    def is_shell(self) -> bool:
        return self.lang in SHELL_LANGS

    @property
    def where(self) -> str:
        return f"{self.path}:{self.line}"


def _apply(block: Block, marker: str) -> None:
    key, _, rest = marker.partition(":")
    rest = rest.strip()
    if key.strip() == "not-tested":
        if not rest:
            raise MarkerError(f"{block.where}: `<!-- not-tested: -->` needs a reason, e.g. `not-tested: needs AWS`.")
        block.not_tested = rest
        return
    if key.strip() != "doc-test":
        return  # an ordinary comment
    directive, _, arg = rest.partition(" ")
    if directive not in _DIRECTIVES:
        raise MarkerError(f"{block.where}: unknown marker `doc-test: {rest}`; expected one of "
                          f"{', '.join(_DIRECTIVES)} (see tests/docs/markdown_blocks.py).")
    if directive == "slow":
        block.slow = True
    elif directive == "file":
        block.file = arg.strip()
    elif directive == "setup":
        block.setup.append(arg.strip())
    else:
        block.teardown.append(arg.strip())


def parse_blocks(path: str, text: str) -> list[Block]:
    """Every fenced block of `text`, with the markers of the HTML comments right above it."""
    tokens = MarkdownIt().parse(text)
    blocks: list[Block] = []
    pending: list[str] = []
    for token in tokens:
        if token.type == "html_block":
            pending.extend(_COMMENT.findall(token.content))
            continue
        if token.type == "fence":
            assert token.map is not None
            block = Block(path, token.map[0] + 1, token.info.strip().split(" ")[0], token.content)
            for marker in pending:
                _apply(block, marker)
            blocks.append(block)
        if token.type.endswith("_open") or token.type in ("fence", "inline", "hr"):
            # Markers apply to the block right below them; list/quote openings in between are fine.
            pending = [] if token.type in ("fence", "inline", "hr") else pending
    return blocks


def doc_files(root: Path) -> list[Path]:
    """README.md and docs/*.md of the repository at `root`."""
    return [root / "README.md", *sorted((root / "docs").glob("*.md"))]


def all_blocks(root: Path) -> list[Block]:
    return [b for p in doc_files(root) for b in parse_blocks(str(p.relative_to(root)), p.read_text())]
