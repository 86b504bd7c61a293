"""The methods `@dataclass` writes for each class, compiled once and kept beside the bytecode.

Why: `@dataclass` writes a class's `__init__`, `__repr__`, `__eq__` (and for a frozen class `__setattr__`,
`__delattr__` and `__hash__`) as source text and compiles it, class by class, at every import: the `.pyc`
files keep a module's own code but not these. A broker's start defines about 220 dataclasses, and their
800-odd compiles were about a quarter of the CPU its imports cost (0.10 of 0.45 s on the loaded 2-core
VM, `bench/start_cost.py`). Here the compiled code objects are kept in one marshal file keyed by their
exact source text: a text found there is not compiled again, any other is compiled as before, so a
class gets the very code it would have got.

How: `dataclasses` hands each text to the builtin `exec`, looked up as a global of its module; `install`
gives that module a global `exec` of ours, which takes the code from the file when it has the text.
`release` takes it away again once the start is done (the loaded table is then dropped). The file is
named for the interpreter (`sys.implementation.cache_tag`: marshal's format is the interpreter's), and is
written by `make bytecode` (`python -m pybroker.broker.dataclass_code`, which imports what a start
imports), like the `.pyc` files, never by a running broker. A file that is missing or unreadable leaves
`dataclasses` as it is.

Threads: the process's main thread, before the event loop runs (`install`) and on the loop (`release`).
"""

from __future__ import annotations

import builtins
import dataclasses
import marshal
import os
import sys
from pathlib import Path
from types import CodeType
from typing import Any

FILE = Path(__file__).parent / "__pycache__" / f"dataclass-code.{sys.implementation.cache_tag}.marshal"

_codes: dict[str, CodeType] = {}
_compiled: dict[str, CodeType] | None = None  # while building the file: every text compiled


def _exec(source: Any, globals: Any = None, locals: Any = None) -> None:
    """`exec` as `dataclasses` calls it: a known text runs its kept code, anything else goes as before."""
    if isinstance(source, str):
        code = _codes.get(source)
        if code is None and _compiled is not None:
            # compiled as the builtin exec would: no future flags (`dataclasses` has none)
            code = _compiled[source] = compile(source, "<string>", "exec", dont_inherit=True)
        if code is not None:
            builtins.exec(code, globals, locals)
            return
    builtins.exec(source, globals, locals)


def install(path: Path = FILE) -> bool:
    """Serve the dataclasses' method code from `path`; False (and nothing changed) when it cannot be read."""
    try:
        with open(path, "rb") as f:
            codes = marshal.load(f)
    except (OSError, EOFError, ValueError, TypeError):
        return False
    if not isinstance(codes, dict):
        return False
    _codes.clear()
    _codes.update(codes)
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    return True


def release() -> None:
    """`dataclasses` back to the builtin `exec`, and the kept code dropped (the classes keep what they use)."""
    if getattr(dataclasses, "exec", None) is _exec:
        del dataclasses.exec  # type: ignore[attr-defined]
    _codes.clear()


def build(path: Path = FILE) -> int:
    """Import what a broker's start imports, record every text `dataclasses` compiles meanwhile, and write
    them to `path` (atomically); the number of texts. Run in a fresh interpreter, before the broker's
    modules are imported (else their classes exist already and nothing is recorded)."""
    global _compiled
    _compiled = {}
    dataclasses.exec = _exec  # type: ignore[attr-defined]
    try:
        from pybroker.broker.cli import _import_structlog_without_rich

        _import_structlog_without_rich()  # as `pybroker start` does
        import pybroker.broker.app  # noqa: F401
        from pybroker.broker.dispatch import load_handlers

        load_handlers()
        recorded = _compiled
    finally:
        _compiled = None
        release()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(marshal.dumps(recorded))
    os.replace(temporary, path)
    return len(recorded)


if __name__ == "__main__":
    if "pybroker.broker.app" in sys.modules:
        raise SystemExit("pybroker.broker.dataclass_code: run it in a fresh interpreter")
    print(f"{build()} dataclass methods compiled into {FILE}")
