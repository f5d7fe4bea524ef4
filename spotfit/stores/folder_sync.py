"""A local folder mirrored under a prefix of the job's store: restored at start, pushed as it changes.

A notebook's working folder lives on a machine that a spot market may take away: `restore`
copies the store's copy into a fresh folder when an attempt starts, and `push` uploads the
files that changed since the last push (by size and modification time) and deletes the
objects of files that were removed. The controller never reads these objects; they are the
notebook's, kept with its checkpoints.

Example:

>>> import tempfile, pathlib
>>> from spotfit.stores import open_store
>>> store = open_store("memory://folder-sync-doc")
>>> a, b = pathlib.Path(tempfile.mkdtemp()), pathlib.Path(tempfile.mkdtemp())
>>> _ = (a / "notes.txt").write_text("hello")
>>> FolderSync(store, "files", a).push()
1
>>> FolderSync(store, "files", b).restore(), (b / "notes.txt").read_text()
(1, 'hello')
"""

from __future__ import annotations

import os
from pathlib import Path

from spotfit.stores.base import ObjectStore


class FolderSync:
    """Mirror `folder` under `prefix` of `store`."""

    def __init__(self, store: ObjectStore, prefix: str, folder: Path):
        self.store = store
        self.prefix = prefix.strip("/")
        self.folder = Path(folder)
        self._pushed: dict[str, tuple[int, int]] = {}  # relative path -> (size, mtime_ns) last pushed

    def restore(self) -> int:
        """Download every file under the prefix into the folder; returns how many."""
        self.folder.mkdir(parents=True, exist_ok=True)
        count = 0
        for key in self.store.list(self.prefix):
            relative = key[len(self.prefix) + 1:]
            target = (self.folder / relative).resolve()
            if not target.is_relative_to(self.folder.resolve()):  # a key with `..` never writes outside
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            self.store.get_file(key, str(target))
            stat = target.stat()
            self._pushed[relative] = (stat.st_size, stat.st_mtime_ns)
            count += 1
        return count

    def push(self) -> int:
        """Upload new and changed files, delete the objects of removed ones; returns files uploaded."""
        seen: dict[str, tuple[int, int]] = {}
        uploaded = 0
        for path in self._files():
            relative = path.relative_to(self.folder).as_posix()
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed while we walked: the next push deletes its object
                continue
            seen[relative] = (stat.st_size, stat.st_mtime_ns)
            if self._pushed.get(relative) != seen[relative]:
                self.store.put_file(str(path), f"{self.prefix}/{relative}")
                uploaded += 1
        for relative in set(self._pushed) - set(seen):
            self.store.delete(f"{self.prefix}/{relative}")
        self._pushed = seen
        return uploaded

    def _files(self) -> list[Path]:
        out: list[Path] = []
        for root, _dirs, names in os.walk(self.folder):
            out.extend(Path(root) / n for n in names if not os.path.islink(Path(root) / n))
        return sorted(out)
