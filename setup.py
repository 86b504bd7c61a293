"""Compiles the record walk (`protocol/records/record_walk.py`) with mypyc, and the Spark reader's record
decoder (`broker/spark/_arrow_records.c`, a small hand-written C extension); everything else is in pyproject.toml.

The source folders install under other names (`protocol/` is `pybroker.protocol`), and mypyc names a
module after its path, so the walk is compiled from a copy placed at its installed name
(`build/mypyc-src/pybroker/protocol/records/record_walk.py`); setuptools then puts the extension where
the package dir mapping says (`protocol/records/` for an editable install, the wheel's
`pybroker/protocol/records/` otherwise). Python prefers the extension to the .py beside it.

`PYBROKER_PURE_PYTHON=1` skips compiling: the same .py then runs as plain Python. So does a failed
compile (no C compiler, say), with a warning: the broker is slower on produce, never broken, and says
at startup which walk it runs (a unit test fails when the compiled one is missing unexpectedly). The
C decoder has a pure-Python twin (`broker/spark/arrow_records_py.py`) for the same cases.
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
#: (source path, installed module) of each module mypyc compiles
COMPILED_MODULES = (("protocol/records/record_walk.py", "pybroker.protocol.records.record_walk"),)
STAGING = Path("build") / "mypyc-src"
#: (C source, installed module) of each hand-written C extension; like the mypyc ones, optional
C_EXTENSIONS = (("broker/spark/_arrow_records.c", "pybroker.broker.spark._arrow_records"),)


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
    hand_written = [Extension(module, [source], extra_compile_args=["-O2"]) for source, module in C_EXTENSIONS]
    return [*mypycify(_staged_sources(), opt_level="3", target_dir=str(Path("build") / "mypyc-c")), *hand_written]


class _OptionalBuildExt(build_ext):
    """Build the compiled walk if this machine can; otherwise install the pure-Python one and say so."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # the compiler and its wrappers raise many types; all mean "no extension"
            _warn(exc)

    def build_extension(self, ext) -> None:  # type: ignore[no-untyped-def]
        try:
            super().build_extension(ext)
        except Exception as exc:
            _warn(exc, ext.name)


def _warn(exc: Exception, name: str = "the compiled modules") -> None:
    print(f"WARNING: {name} was not compiled ({exc}); pybroker will run its pure-Python twin", file=sys.stderr)


setup(ext_modules=_extensions(), cmdclass={"build_ext": _OptionalBuildExt})
