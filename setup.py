"""Compiles the record walk (`protocol/records/record_walk.py`) with mypyc; everything else is in pyproject.toml.

The source folders install under other names (`protocol/` is `pybroker.protocol`), and mypyc names a
module after its path, so the walk is compiled from a copy placed at its installed name
(`build/mypyc-src/pybroker/protocol/records/record_walk.py`); setuptools then puts the extension where
the package dir mapping says (`protocol/records/` for an editable install, the wheel's
`pybroker/protocol/records/` otherwise). Python prefers the extension to the .py beside it.

`PYBROKER_PURE_PYTHON=1` skips compiling: the same .py then runs as plain Python.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from setuptools import setup

HERE = Path(__file__).resolve().parent
#: (source path, installed module) of each module mypyc compiles
COMPILED_MODULES = (("protocol/records/record_walk.py", "pybroker.protocol.records.record_walk"),)
STAGING = Path("build") / "mypyc-src"


def _staged_sources() -> list[str]:
    """Copies of the compiled modules at paths that spell their installed names (relative paths: mypyc
    bakes the path into the generated C, and a relative one keeps builds reproducible), each stamped
    with the SHA-256 of the source it was made from (`BUILT_FROM_SHA256`)."""
    paths = []
    for source, module in COMPILED_MODULES:
        target = STAGING.joinpath(*module.split(".")).with_suffix(".py")
        target.parent.mkdir(parents=True, exist_ok=True)
        for package in target.parents:
            if package == STAGING:
                break
            (package / "__init__.py").touch()
        text = (HERE / source).read_bytes()
        digest = hashlib.sha256(text).hexdigest()  # lets the package notice an extension older than its source
        target.write_bytes(text + f'\nBUILT_FROM_SHA256: Final = "{digest}"\n'.encode())
        paths.append(str(target))
    return paths


def _extensions() -> list:
    if os.environ.get("PYBROKER_PURE_PYTHON", "") not in ("", "0"):
        return []
    from mypyc.build import mypycify

    os.chdir(HERE)
    return mypycify(_staged_sources(), opt_level="3", target_dir=str(Path("build") / "mypyc-c"))


setup(ext_modules=_extensions())
