"""Reading a job spec file that nobody vouches for: bounded in size, encoding, nesting and aliases.

`read_spec_file(path)` returns the parsed YAML document, or raises `SpecError` with one line: a
file over `MAX_SPEC_BYTES` is refused before it is read, text must be UTF-8 (UTF-16/32 byte
order marks, NUL bytes and undecodable bytes are named), and the YAML loader refuses nesting
deeper than `MAX_SPEC_DEPTH` and documents of more than `MAX_SPEC_VALUES` values once aliases
are expanded, while it composes them (so an alias bomb never expands), and a key written twice in
one mapping (plain YAML keeps the last, silently). `job.py` validates what it returns.

Example:

>>> import tempfile, pathlib
>>> path = pathlib.Path(tempfile.mkdtemp()) / "spotfit.yaml"
>>> _ = path.write_text("{name: digits, script: train.py}")
>>> read_spec_file(path)
{'name': 'digits', 'script': 'train.py'}
>>> _ = path.write_text("name: digits\\nscript: train.py\\nname: other\\n")
>>> read_spec_file(path)  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
spotfit.errors.SpecError: Job spec ... names `name` twice: at line 1 and again at line 3; expected each key once ...
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from spotfit.errors import SpecError

MAX_SPEC_BYTES = 1 << 20  # a job spec is a few kilobytes; anything near this is the wrong file
MAX_SPEC_VALUES = 10_000  # values in the document after YAML aliases are expanded
MAX_SPEC_DEPTH = 32  # nesting of mappings and lists


def read_spec_file(path: Path, what: str = "Job spec") -> Any:
    """The YAML document in `path`, read within the limits above; errors call the file `what` ("Settings file")."""
    return _parse_yaml(_read_text(path, what), path, what)


_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32"), (b"\x00\x00\xfe\xff", "UTF-32"), (b"\xff\xfe", "UTF-16"),
         (b"\xfe\xff", "UTF-16"))


def _read_text(path: Path, what: str) -> str:
    """The file as text: at most `MAX_SPEC_BYTES` read, UTF-8 only (a UTF-8 BOM is dropped)."""
    try:
        size = path.stat().st_size
        data = b""
        if size <= MAX_SPEC_BYTES:
            with path.open("rb") as f:  # never more than the cap, whatever stat() said
                data = f.read(MAX_SPEC_BYTES + 1)
    except OSError as exc:
        raise SpecError(f"{what} {path} cannot be read: {exc.strerror or exc}.",
                        hint="Check that the file exists and that you may read it.") from None
    if max(size, len(data)) > MAX_SPEC_BYTES:
        raise SpecError(
            f"{what} {path} is too large: received {max(size, len(data)):,} bytes, expected at most "
            f"{MAX_SPEC_BYTES:,} (1 MiB).",
            hint="Pass the job's YAML file (a few kilobytes), not a data, model or log file.",
        )
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            raise SpecError(f"{what} {path} is {encoding} text: expected UTF-8.",
                            hint=f"Convert it: `iconv -f {encoding} -t UTF-8 {path.name} > spotfit.yaml`.")
    if b"\x00" in data:
        raise SpecError(
            f"{what} {path} has a NUL byte at offset {data.index(0)}: expected UTF-8 text "
            "(is it UTF-16 without a byte-order mark, or not a text file?).",
            hint="Save the spec as UTF-8 text.",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise SpecError(
            f"{what} {path} is not UTF-8 text: byte 0x{data[exc.start]:02x} at offset {exc.start} cannot be "
            "decoded; expected a UTF-8 YAML file.",
            hint="Save the spec as UTF-8 (or check that you passed the YAML and not a binary file).",
        ) from None


class _SpecLimit(Exception):
    """The document breaks a bound of `_SpecLoader` (at `mark`)."""

    def __init__(self, problem: str, mark: Any):
        super().__init__(problem)
        self.problem = problem
        self.mark = mark


class _DuplicateKey(Exception):
    """A mapping names `key` twice (first at `first`, again at `again`)."""

    def __init__(self, key: Any, first: Any, again: Any):
        super().__init__(key)
        self.key, self.first, self.again = key, first, again


class _SpecLoader(yaml.SafeLoader):
    """PyYAML's safe loader, bounded: nesting depth, and values counted after alias expansion.

    An alias counts as many values as the node it names, so a document whose aliases expand
    exponentially is refused while it is being composed, before anything is built from it.
    """

    def __init__(self, stream: str):
        super().__init__(stream)
        self._depth = 0
        self._values = 0
        self._sizes: dict[int, int] = {}  # id(node) -> values in it once expanded (finished nodes)

    if TYPE_CHECKING:  # PyYAML's stubs leave `Parser.peek_event` untyped: what it returns, for mypy only

        def peek_event(self) -> yaml.Event: ...

    def compose_node(self, parent: Any, index: Any) -> Any:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            if id(node) not in self._sizes:  # an alias inside its own anchor
                raise _SpecLimit("an alias refers to the mapping or list that contains it", mark)
            self._count(self._sizes[id(node)], mark)
            return node
        if self._depth >= MAX_SPEC_DEPTH:
            raise _SpecLimit(f"mappings and lists nest deeper than {MAX_SPEC_DEPTH} levels", mark)
        before = self._values
        self._depth += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._depth -= 1
        self._count(1, mark)
        self._sizes[id(node)] = self._values - before
        return node

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        """A mapping whose keys are each written once: YAML would keep the last silently."""
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, Any] = {}
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue  # `<<: *base`: keys written here override the merged ones, as YAML says
                key = self.construct_object(key_node, deep=True)
                try:
                    first = seen.setdefault(key, key_node.start_mark)
                except TypeError:
                    continue  # an unhashable key: SafeConstructor refuses it with its own message
                if first is not key_node.start_mark:
                    raise _DuplicateKey(key, first, key_node.start_mark)
        return super().construct_mapping(node, deep=deep)

    def _count(self, values: int, mark: Any) -> None:
        self._values += values
        if self._values > MAX_SPEC_VALUES:
            raise _SpecLimit(f"the document holds more than {MAX_SPEC_VALUES:,} values once its aliases "
                             "are expanded", mark)


def parse_spec_text(text: str, source: str) -> Any:
    """The YAML document in `text` (a spec's content, not read from a file), parsed within the limits above."""
    return _parse_yaml(text, Path(source))


def _parse_yaml(text: str, path: Path, what: str = "Job spec") -> Any:
    """One YAML document, parsed with `_SpecLoader`; every failure is one `SpecError` line."""
    try:
        return yaml.load(text, Loader=_SpecLoader)  # noqa: S506  (a SafeLoader subclass)
    except _SpecLimit as exc:
        mark = exc.mark
        raise SpecError(
            f"{what} {path} is refused at line {mark.line + 1}, column {mark.column + 1}: {exc.problem}; "
            f"expected a job spec (at most {MAX_SPEC_VALUES:,} values, {MAX_SPEC_DEPTH} levels deep).",
            hint="Write the values out plainly; a job spec needs no deep nesting or chains of aliases.",
        ) from None
    except _DuplicateKey as exc:
        raise SpecError(
            f"{what} {path} names `{exc.key}` twice: at line {exc.first.line + 1} and again at line "
            f"{exc.again.line + 1}; expected each key once (YAML would silently keep the last).",
            hint=f"Keep one `{exc.key}:` and delete the other.",
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = " ".join(str(getattr(exc, "problem", None) or exc).split())
        raise SpecError(
            f"{what} {path} is not valid YAML{where}: {problem}.",
            hint="Check indentation and quoting around that line.",
        ) from None
