"""Which of pybroker's modules run compiled (mypyc, see setup.py), and whether each was built from its source.

The install compiles the hot modules (codecs, record batches, the record walk) when it can, and the
same .py files run as plain Python when it cannot (`PYBROKER_PURE_PYTHON=1`, no C compiler): both
behave the same, the compiled ones are faster. The broker's start log names the compiled modules, so a
slow broker that runs pure Python says so.

Python prefers an extension to the .py beside it, so an extension built before its source changed (a
checkout, `make gen`, without a reinstall) would run old code: each compiled module carries the SHA-256
of the source it was built from (`BUILT_FROM_SHA256`), and `stale()` names those that no longer match.
The record walk, which judges records, falls back to its source by itself (`records_check`); `make`
reinstalls whenever a compiled module's source changes.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import sys
from types import ModuleType

__all__ = ["compiled", "is_compiled", "stale"]

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


def _source_digest(module: ModuleType) -> str | None:
    """SHA-256 of the .py beside a compiled module (None when the install has no source beside it)."""
    path = getattr(module, "__file__", None) or ""
    source = path[: path.find(".", path.rfind("/") + 1)] + ".py"
    try:
        data = importlib.machinery.SourceFileLoader(module.__name__, source).get_data(source)
    except OSError:
        return None
    return hashlib.sha256(data).hexdigest()


def stale() -> list[str]:
    """The loaded compiled modules built from another version of their source (reinstall to rebuild)."""
    out = []
    for module in _loaded():
        if is_compiled(module) and hasattr(module, "BUILT_FROM_SHA256"):
            digest = _source_digest(module)
            if digest is not None and digest != module.BUILT_FROM_SHA256:
                out.append(module.__name__.removeprefix(_PACKAGE))
    return out
