"""Compiles the hot modules (`COMPILED_MODULES`: codecs, record batches, the record walk) with mypyc, and
two small hand-written C extensions (`C_EXTENSIONS`): the Spark reader's record decoder
(`clients/spark/_arrow_records.c`) and the record walk's copy-free fast path (`protocol/records/_walk_accept.c`).

Everything else is in pyproject.toml. The source folders install under other names (`protocol/` is
`pybroker.protocol`), and mypyc names a module after its path, so the source folders are copied to
their installed names (`build/mypyc-src/pybroker/protocol/...`, so that mypy also finds what the compiled
modules import) and the table's modules are compiled from those copies; setuptools then puts each
extension where the package dir mapping says (`protocol/...` for an editable install, the wheel's
`pybroker/protocol/...` otherwise). Python prefers an extension to the .py beside it.

Each module is its own extension (mypyc's separate mode): the C files compile in parallel, one per
core, and calls between the modules stay native. Each compiled copy is stamped with the SHA-256 of the
source it was made from (`BUILT_FROM_SHA256`), so the package can tell an extension older than its
source (`pybroker.broker.compiled_modules`).

`PYBROKER_PURE_PYTHON=1` skips compiling: the same .py files then run as plain Python. So does a failed
compile (no C compiler, say), with a warning: the broker is slower, never broken, and says at startup
which modules run compiled (a unit test fails when the compiled ones are missing unexpectedly).
The C decoder has a pure-Python twin (`clients/spark/arrow_records_py.py`) for the same cases; without the
walk's fast path, every batch is walked by `record_walk` (on a copy), as before.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import warnings
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.warnings import InformationOnly

# An editable install (`make install`: pip install -e) ends with setuptools' notice "Editable installation.",
# a warning pip prints even when quiet: folders in the working directory named like the package could shadow
# it. None here is named pybroker (its subpackages map to broker/, protocol/, ...), so that one notice is
# dropped (this file runs in the build backend's process, before the notice is raised); every other
# warning still shows.
warnings.filterwarnings("ignore", message=r"Editable installation\.", category=InformationOnly)

HERE = Path(__file__).resolve().parent
#: each module mypyc compiles, one row per module (installed name; its source follows from the package
#: dir mapping below). The generated messages compiled are the hot APIs': the rest stay pure Python.
COMPILED_MODULES = (
    "pybroker.protocol.primitives",
    "pybroker.protocol.api_message",
    "pybroker.protocol.frame_splitter",
    "pybroker.protocol.records.batch",
    "pybroker.protocol.records.varint",
    "pybroker.protocol.records.record",
    "pybroker.protocol.records.record_walk",
    "pybroker.protocol.records.validate",
    "pybroker.protocol.messages.headers",
    "pybroker.protocol.messages.api_versions",
    "pybroker.protocol.messages.produce",
    "pybroker.protocol.messages.fetch",
    "pybroker.protocol.messages.metadata",
    "pybroker.protocol.messages.list_offsets",
    "pybroker.protocol.messages.offset_commit",
    "pybroker.protocol.messages.offset_fetch",
    "pybroker.protocol.messages.heartbeat",
)
#: installed package prefix -> source folder (pyproject.toml's [tool.setuptools.package-dir])
SOURCE_DIRS = {"pybroker.protocol": "protocol", "pybroker.broker": "broker", "pybroker.storage": "storage",
               "pybroker.config": "config"}
STAGING = Path("build") / "mypyc-src"
#: (C source, installed module) of each hand-written C extension; like the mypyc ones, optional
C_EXTENSIONS = (("clients/spark/_arrow_records.c", "pybroker.clients.spark._arrow_records"),
                ("protocol/records/_walk_accept.c", "pybroker.protocol.records._walk_accept"))
#: the header both include (`record_bytes.h`: the varint and UTF-8 rules written once)
C_INCLUDE = "protocol/records"


def _source_of(module: str) -> Path:
    for prefix, folder in SOURCE_DIRS.items():
        if module.startswith(prefix + "."):
            return Path(folder, *module[len(prefix) + 1 :].split(".")).with_suffix(".py")
    raise ValueError(f"{module}: not in a source folder")


def _staged_sources() -> list[str]:
    """The source folders copied under their installed names (relative paths: mypyc bakes the path into
    the generated C, and a relative one keeps builds reproducible); the compiled ones stamped with the
    SHA-256 of their source. Returns the compiled copies' paths."""
    shutil.rmtree(STAGING, ignore_errors=True)
    for prefix, folder in SOURCE_DIRS.items():
        shutil.copytree(folder, STAGING.joinpath(*prefix.split(".")),
                        ignore=shutil.ignore_patterns("__pycache__", "*.so", "static"))
    (STAGING / "pybroker" / "__init__.py").touch()
    paths = []
    for module in COMPILED_MODULES:
        text = _source_of(module).read_bytes()
        digest = hashlib.sha256(text).hexdigest()  # lets the package notice an extension older than its source
        target = STAGING.joinpath(*module.split(".")).with_suffix(".py")
        target.write_bytes(text + f'\nBUILT_FROM_SHA256: str = "{digest}"\n'.encode())
        paths.append(str(target))
    return paths


def _extensions() -> list:
    if os.environ.get("PYBROKER_PURE_PYTHON", "") not in ("", "0"):
        return []
    os.chdir(HERE)
    hand_written = [Extension(module, [source], include_dirs=[C_INCLUDE], depends=[f"{C_INCLUDE}/record_bytes.h"],
                              extra_compile_args=["-O2"]) for source, module in C_EXTENSIONS]
    try:
        from mypyc.build import mypycify

        compiled = mypycify(["--ignore-missing-imports", *_staged_sources()], opt_level="3", separate=True,
                            target_dir=str(Path("build") / "mypyc-c"))
    except (Exception, SystemExit) as exc:  # mypyc exits on a type error: install pure Python, say why
        _warn(exc)
        compiled = []
    return [*compiled, *hand_written]


class _OptionalBuildExt(build_ext):
    """Build the compiled modules if this machine can (one C compile per core); otherwise install the
    pure-Python ones and say so."""

    def finalize_options(self) -> None:
        super().finalize_options()
        if not self.parallel:
            self.parallel = os.cpu_count() or 1

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


#: the build leaves nothing in the checkout: mypyc's staged sources and C files and setuptools' temp dirs
#: go to build/, removed once setup is done (an 18 MB dir a user never asked for), unless it was there before
_BUILD_WAS_THERE = (HERE / "build").exists()
try:
    setup(ext_modules=_extensions(), cmdclass={"build_ext": _OptionalBuildExt})
finally:
    if not _BUILD_WAS_THERE:
        shutil.rmtree(HERE / "build", ignore_errors=True)
