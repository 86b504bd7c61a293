"""The model of a lazy disk: what a process sees now, and what would survive a power cut.

Why a model of its own: after `kill -9` the kernel's page cache still holds every write, so crash tests
prove nothing about fsync. This tree keeps the two states apart, as Jepsen's LazyFS does:

- the *backing directory* holds exactly the durable state, as an ordinary tree of files;
- the nodes in memory hold what a process sees: each file's unsynced bytes (`Node.data`), and each
  directory's entries (`Node.children`) including creates, renames and unlinks not yet made durable.

The rules, one per call:
- `fsync_file`: the file's bytes become durable under every name it durably has (its backing links);
  a file with no durable name keeps its synced bytes in memory (`Node.synced`) until a name is made durable.
  fsync of a file never makes its directory entry durable.
- `fsync_dir`: the directory's entries become durable: the backing directory is made to hold the same
  names for the same nodes (new names linked or created, replaced names swapped, removed names unlinked).
  A file linked there for the first time gets its durable bytes (empty if it was never fsynced).
- A power cut is dropping this object: the backing directory is what survived.

Simplifications, each erring towards durability only where a real file system may as well:
- a directory renamed to another directory becomes durable at its new place when either directory is
  fsynced (a real file system journals the rename as one operation);
- a directory made durable by its parent's fsync brings the entries it had when it was itself fsynced
  earlier (it takes its current ones);
- hard links made by callers are not supported (the broker makes none): each node has one visible name.

Threads: not thread-safe; the FUSE operations (`tests/powerloss/lazyfs.py`) call it under one lock.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import shutil
import stat
import time
from dataclasses import dataclass, field

TMP_NAME = ".lazyfs-swap"
_ids = itertools.count(1)


@dataclass(eq=False)
class Node:
    """A file or a directory: its visible state, and where its durable state lives in the backing dir."""

    is_dir: bool
    mode: int
    # visible place (None for the root, and for a file unlinked while still open)
    parent: Node | None = None
    name: str = ""
    # directories: visible entries, and the entries the backing directory holds (name -> node)
    children: dict[str, Node] = field(default_factory=dict)
    durable: dict[str, Node] = field(default_factory=dict)
    # directories: (parent, name) of its backing directory; files: every (parent, name) it is durable under
    links: set[tuple[Node, str]] = field(default_factory=set)
    # files: the visible bytes (None until first needed: then read from a backing link)
    data: bytearray | None = None
    dirty_from: int | None = None  # lowest offset changed since the last fsync
    synced: bytes | None = None  # durable bytes of a file that has no durable name yet
    dir_was_synced: bool = False
    mtime_ns: int = field(default_factory=time.time_ns)
    ino: int = field(default_factory=lambda: next(_ids))


class LazyTree:
    """The visible tree over a backing directory that holds only what is durable."""

    def __init__(self, backing: str) -> None:
        self.backing = os.path.abspath(backing)
        self.root = Node(is_dir=True, mode=stat.S_IFDIR | 0o755)
        self._load(self.root, self.backing, {})

    # -- loading what survived ------------------------------------------------------------------------
    def _load(self, directory: Node, path: str, seen: dict[tuple[int, int], Node]) -> None:
        """Read the durable tree into nodes; a leftover swap file of an interrupted fsync is removed."""
        for entry in os.scandir(path):
            if entry.name == TMP_NAME:
                os.unlink(entry.path)
                continue
            st = entry.stat(follow_symlinks=False)
            key = (st.st_dev, st.st_ino)
            if stat.S_ISDIR(st.st_mode):
                node = Node(is_dir=True, mode=st.st_mode, mtime_ns=st.st_mtime_ns)
                node.links.add((directory, entry.name))
                self._load(node, entry.path, seen)
            elif stat.S_ISREG(st.st_mode):
                node = seen.get(key) or Node(is_dir=False, mode=st.st_mode, mtime_ns=st.st_mtime_ns)
                seen[key] = node
                node.links.add((directory, entry.name))
            else:
                continue
            node.parent, node.name = directory, entry.name
            directory.children[entry.name] = node
            directory.durable[entry.name] = node

    # -- paths ------------------------------------------------------------------------------------------
    def backing_path(self, directory: Node) -> str | None:
        """Where a directory's durable entries live, or None if the directory itself is not durable."""
        if directory is self.root:
            return self.backing
        if not directory.links:
            return None
        (parent, name), = directory.links
        base = self.backing_path(parent)
        return None if base is None else os.path.join(base, name)

    def _link_path(self, link: tuple[Node, str]) -> str:
        base = self.backing_path(link[0])
        assert base is not None, "a durable name in a directory that is not durable"
        return os.path.join(base, link[1])

    def lookup(self, path: str) -> Node:
        node = self.root
        for part in path.strip("/").split("/"):
            if not part:
                continue
            if not node.is_dir:
                raise NotADirectoryError(path)
            try:
                node = node.children[part]
            except KeyError:
                raise FileNotFoundError(path) from None
        return node

    def parent_of(self, path: str) -> tuple[Node, str]:
        head, _, name = path.rstrip("/").rpartition("/")
        parent = self.lookup(head or "/")
        if not parent.is_dir:
            raise NotADirectoryError(path)
        return parent, name

    # -- file data --------------------------------------------------------------------------------------
    def content(self, node: Node) -> bytearray:
        """The visible bytes, read from the durable copy on first use."""
        if node.data is None:
            node.data = bytearray(self._durable_bytes(node))
        return node.data

    def _durable_bytes(self, node: Node) -> bytes:
        if node.links:
            with open(self._link_path(next(iter(node.links))), "rb") as f:
                return f.read()
        return node.synced or b""

    def size(self, node: Node) -> int:
        if node.data is not None:
            return len(node.data)
        if node.links:
            return os.stat(self._link_path(next(iter(node.links)))).st_size
        return len(node.synced or b"")

    def write(self, node: Node, offset: int, buf: bytes) -> int:
        data = self.content(node)
        if offset > len(data):
            data.extend(bytes(offset - len(data)))
        data[offset:offset + len(buf)] = buf
        self._dirty(node, offset)
        return len(buf)

    def truncate(self, node: Node, length: int) -> None:
        data = self.content(node)
        old_length = len(data)
        if length < old_length:
            del data[length:]
        else:
            data.extend(bytes(length - old_length))
        self._dirty(node, min(length, old_length))

    def _dirty(self, node: Node, offset: int) -> None:
        node.dirty_from = offset if node.dirty_from is None else min(node.dirty_from, offset)
        node.mtime_ns = time.time_ns()

    # -- namespace --------------------------------------------------------------------------------------
    def create(self, path: str, mode: int, is_dir: bool) -> Node:
        parent, name = self.parent_of(path)
        if name in parent.children:
            raise FileExistsError(path)
        node = Node(is_dir=is_dir, mode=mode, parent=parent, name=name)
        if not is_dir:
            node.data = bytearray()
        parent.children[name] = node
        return node

    def remove(self, path: str, is_dir: bool) -> None:
        parent, name = self.parent_of(path)
        node = parent.children.get(name)
        if node is None:
            raise FileNotFoundError(path)
        if is_dir and not node.is_dir:
            raise NotADirectoryError(path)
        if not is_dir and node.is_dir:
            raise IsADirectoryError(path)
        if is_dir and node.children:
            raise OSError(39, "Directory not empty", path)
        if not node.is_dir:
            self.content(node)  # an open handle still reads it after its durable name is gone
        del parent.children[name]
        node.parent = None

    def rename(self, old: str, new: str) -> None:
        old_parent, old_name = self.parent_of(old)
        node = old_parent.children.get(old_name)
        if node is None:
            raise FileNotFoundError(old)
        new_parent, new_name = self.parent_of(new)
        if new_parent is old_parent and new_name == old_name:
            return
        ancestor: Node | None = new_parent
        while ancestor is not None:
            if ancestor is node:
                raise OSError(22, "Invalid argument", new)
            ancestor = ancestor.parent
        target = new_parent.children.get(new_name)
        if target is not None:
            if target.is_dir != node.is_dir:
                raise (IsADirectoryError if target.is_dir else NotADirectoryError)(new)
            if target.is_dir and target.children:
                raise OSError(39, "Directory not empty", new)
            if not target.is_dir:
                self.content(target)
            target.parent = None
        del old_parent.children[old_name]
        new_parent.children[new_name] = node
        node.parent, node.name = new_parent, new_name

    # -- durability -------------------------------------------------------------------------------------
    def fsync_file(self, node: Node) -> None:
        """The file's bytes become durable under each durable name; its names do not change."""
        if node.is_dir:
            self.fsync_dir(node)
            return
        if node.data is None or node.dirty_from is None:
            return
        if not node.links:
            node.synced = bytes(node.data)
        else:
            with open(self._link_path(next(iter(node.links))), "r+b") as f:
                f.seek(node.dirty_from)
                f.write(node.data[node.dirty_from:])
                f.truncate(len(node.data))
        node.dirty_from = None

    def fsync_dir(self, directory: Node) -> None:
        """The directory's entries become durable: the backing directory gets the same names for the same nodes."""
        directory.dir_was_synced = True
        base = self.backing_path(directory)
        if base is None:
            return  # made durable, entries and all, when its own parent is fsynced
        for name, node in list(directory.children.items()):
            if directory.durable.get(name) is node:
                continue
            if node.is_dir:
                self._place_dir(directory, base, name, node)
            else:
                self._place_file(directory, base, name, node)
        for name, node in list(directory.durable.items()):
            if directory.children.get(name) is not node:
                self._drop(directory, base, name)

    def _place_file(self, directory: Node, base: str, name: str, node: Node) -> None:
        swap = os.path.join(base, TMP_NAME)
        if node.links:
            os.link(self._link_path(next(iter(node.links))), swap)
        else:
            with open(swap, "wb") as f:
                f.write(node.synced or b"")
            os.chmod(swap, stat.S_IMODE(node.mode))
        old = directory.durable.get(name)
        if old is not None and old.is_dir:
            self._drop(directory, base, name)
        elif old is not None and old.links == {(directory, name)}:
            old.synced = self._durable_bytes(old)  # replaced, maybe still open: keep its durable bytes
        os.replace(swap, os.path.join(base, name))
        self._forget(directory, name)
        directory.durable[name] = node
        node.links.add((directory, name))

    def _place_dir(self, directory: Node, base: str, name: str, node: Node) -> None:
        if name in directory.durable:
            self._drop(directory, base, name)
        path = os.path.join(base, name)
        if node.links:  # a rename: move the durable directory with everything durable in it
            (old_parent, old_name), = node.links
            os.rename(self._link_path((old_parent, old_name)), path)
            old_parent.durable.pop(old_name, None)
            node.links.clear()
            node.links.add((directory, name))
        else:
            os.mkdir(path, stat.S_IMODE(node.mode))
            node.links.add((directory, name))
        directory.durable[name] = node
        if node.dir_was_synced:
            self.fsync_dir(node)

    def _drop(self, directory: Node, base: str, name: str) -> None:
        """Remove a durable name whose visible entry is gone or is another node now."""
        node = directory.durable[name]
        path = os.path.join(base, name)
        if node.is_dir:
            if node.parent is not None and self.backing_path(node.parent) is not None:
                self._place_dir(node.parent, self.backing_path(node.parent) or "", node.name, node)
                return  # it moved: its new place is durable now too (see the module's simplifications)
            self._forget_tree(node)
            shutil.rmtree(path)
            directory.durable.pop(name, None)
            return
        if node.links == {(directory, name)}:
            node.synced = self._durable_bytes(node)  # the last durable name: keep its durable bytes
        os.unlink(path)
        self._forget(directory, name)

    def _forget(self, directory: Node, name: str) -> None:
        old = directory.durable.pop(name, None)
        if old is not None:
            old.links.discard((directory, name))

    def _forget_tree(self, node: Node) -> None:
        for name, child in list(node.durable.items()):
            if child.is_dir:
                self._forget_tree(child)
            else:
                if child.links == {(node, name)}:
                    with contextlib.suppress(OSError):
                        child.synced = self._durable_bytes(child)
                child.links.discard((node, name))
        node.durable.clear()
        node.links.clear()
