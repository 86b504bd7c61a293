"""Which of pybroker's modules run compiled (mypyc, see setup.py), and whether each was built from its source.

The install compiles the hot modules (codecs, record batches, the record walk) when it can, and the
same .py files run as plain Python when it cannot (`PYBROKER_PURE_PYTHON=1`, no C compiler): both
behave the same, the compiled ones are faster. The broker's start log names the compiled modules, so a
slow broker that runs pure Python says so.

Python prefers an extension to the .py beside it, so an extension built before its source changed (a
checkout, `make gen`, without a reinstall) would run old code: each compiled module carries the SHA-256
of the source it was built from (`BUILT_FROM_SHA256`), and `stale()` names those that no longer match.
The record walk, which judges records, falls back to its source at the broker's start
(`guard_record_walk`: a stale walk must never judge records); `make` reinstalls whenever a compiled
module's source changes, and `tests/unit/protocol/test_compiled.py` fails while any module is stale.

It lives in the server, not in `protocol` (which is sans-I/O), because it reads the installed sources
beside the extensions through the import system's loaders: at the broker's start, never per request.
Any thread may call these functions; only `guard_record_walk` changes state (the walk `records_check`
uses), and the broker calls it once, on the event loop's thread, before it serves anything.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

from pybroker.protocol.records import records_check

__all__ = ["compiled", "guard_record_walk", "is_compiled", "load_pure_walk", "source_digest", "source_twin",
           "stale"]

_PACKAGE = "pybroker."


def is_compiled(module: ModuleType) -> bool:
    """True when `module` was loaded from an extension rather than from Python source."""
    return isinstance(getattr(module, "__loader__", None), importlib.machinery.ExtensionFileLoader)


def _loaded() -> list[ModuleType]:
    """pybroker's loaded modules (not mypyc's shared libraries, `<module>__mypyc`, which hold their C code)."""
    return [m for name, m in sorted(sys.modules.items())
            if name.startswith(_PACKAGE) and not name.endswith("__mypyc") and m is not None]


def compiled() -> list[str]:
    """The names (without `pybroker.`) of the loaded modules that run compiled."""
    return [m.__name__.removeprefix(_PACKAGE) for m in _loaded() if is_compiled(m)]


def source_digest(module: ModuleType) -> str | None:
    """SHA-256 of the .py beside a compiled module (None when the install has no source beside it)."""
    path = getattr(module, "__file__", None) or ""
    source = path[: path.find(".", path.rfind("/") + 1)] + ".py"
    try:
        data = importlib.machinery.SourceFileLoader(module.__name__, source).get_data(source)
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()


def source_twin(name: str, alias: str) -> ModuleType:
    """Module `name` run from its .py source whatever is installed beside it (an extension shadows it
    for `import`), as a separate module called `alias` (not put in `sys.modules`)."""
    package, _, _ = name.rpartition(".")
    finder_path = importlib.import_module(package).__path__
    sources = (importlib.machinery.SourceFileLoader, importlib.machinery.SOURCE_SUFFIXES)
    for directory in finder_path:
        found = importlib.machinery.FileFinder(directory, sources).find_spec(name)
        if found is not None and found.origin is not None:
            loader = importlib.machinery.SourceFileLoader(alias, found.origin)
            spec = importlib.util.spec_from_loader(alias, loader)
            if spec is not None:
                module = importlib.util.module_from_spec(spec)
                loader.exec_module(module)
                return module
    raise ImportError(f"no Python source of {name} in {list(finder_path)}")


def stale() -> list[str]:
    """The loaded compiled modules built from another version of their source (reinstall to rebuild)."""
    out = []
    for module in _loaded():
        if is_compiled(module) and hasattr(module, "BUILT_FROM_SHA256"):
            digest = source_digest(module)
            if digest is not None and digest != module.BUILT_FROM_SHA256:
                out.append(module.__name__.removeprefix(_PACKAGE))
    return out


def load_pure_walk() -> ModuleType:
    """The record walk run from its Python source, whatever is installed (tests and the bench compare the two)."""
    return source_twin("pybroker.protocol.records.record_walk", "pybroker.protocol.records._record_walk_source")


def guard_record_walk() -> str:
    """Run the record walk from its source when the compiled one was built from another version of it (a
    checkout changed the .py since the last `make install`); what `records_check` then uses, for the log."""
    installed = records_check.walk_module()
    if records_check.COMPILED:
        digest = source_digest(installed)  # None: an install without the source, nothing to compare
        if digest is not None and digest != getattr(installed, "BUILT_FROM_SHA256", None):
            records_check.use_walk(load_pure_walk(), "pure Python (the compiled extension was built from "
                                                     "another source: reinstall)")
    return records_check.WALK_IMPLEMENTATION
