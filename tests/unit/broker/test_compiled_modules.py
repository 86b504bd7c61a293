"""The compiled build: every module of setup.py's table runs compiled unless the install was pure Python,
and an extension older than its source is named (the broker's start log warns about it)."""

from __future__ import annotations

import ast
import hashlib
import importlib
import importlib.machinery
import os
import sys
import types
from pathlib import Path

import pytest

from pybroker.broker import compiled_modules as compiled

ROOT = Path(__file__).resolve().parents[3]


def _table() -> list[str]:
    """setup.py's COMPILED_MODULES, read without running setup.py."""
    for node in ast.parse((ROOT / "setup.py").read_text()).body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "COMPILED_MODULES":
            return list(ast.literal_eval(node.value))
    raise AssertionError("setup.py has no COMPILED_MODULES")


@pytest.mark.parametrize("module", _table())
def test_the_table_s_modules_are_compiled(module: str) -> None:
    loaded = importlib.import_module(module)
    if os.environ.get("PYBROKER_PURE_PYTHON", "") in ("", "0"):
        assert compiled.is_compiled(loaded), f"{module} runs as pure Python: reinstall (make install)"
        assert module.removeprefix("pybroker.") in compiled.compiled()
    assert module.removeprefix("pybroker.") not in compiled.stale(), f"{module}: reinstall (make install)"


def test_an_extension_older_than_its_source_is_stale(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text("X = 1\n")
    extension = tmp_path / "probe.cpython-311-x86_64-linux-gnu.so"
    name = "pybroker.protocol._compiled_probe"
    probe = types.ModuleType(name)
    probe.__file__ = str(extension)
    probe.__loader__ = importlib.machinery.ExtensionFileLoader(name, str(extension))
    probe.BUILT_FROM_SHA256 = hashlib.sha256(b"X = 0\n").hexdigest()  # type: ignore[attr-defined]
    sys.modules[name] = probe
    try:
        assert "protocol._compiled_probe" in compiled.compiled()
        assert "protocol._compiled_probe" in compiled.stale()
        probe.BUILT_FROM_SHA256 = hashlib.sha256(source.read_bytes()).hexdigest()  # type: ignore[attr-defined]
        assert "protocol._compiled_probe" not in compiled.stale()
    finally:
        del sys.modules[name]


def test_pure_python_modules_are_not_reported() -> None:
    from pybroker.protocol import errors

    assert not compiled.is_compiled(errors)
    assert "protocol.errors" not in compiled.compiled()
