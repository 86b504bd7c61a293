"""The layers import only downwards: broker -> storage -> protocol; clients -> protocol, config; config
depends on nothing.

`clients` (the admin commands, the Spark connector, the wire client) runs outside the broker process: it
never imports the server, and of storage only `storage.offline` (the file formats the offline tools
read). The server never imports the clients, except the one command-line entry point that hands every
command but `start` to them.

`protocol` is sans-I/O, so it may not import sockets, asyncio, threads or file-system modules either,
nor call anything that opens or reads a file (found in the syntax tree: `open(...)`, `io.open`,
`Path(...).read_text()`, `importlib.resources`, loaders given a file's path, ...). One exception: the
code generator (a build tool, never imported at run time). What compares the installed extensions with
their sources is the server's (`broker/compiled_modules.py`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ALLOWED = {
    "protocol": {"protocol"},
    "storage": {"storage", "protocol"},
    "config": {"config"},
    "broker": {"broker", "storage", "protocol", "config"},
    "clients": {"clients", "protocol", "config"},
}
#: single modules a layer may import beyond its layers: (importing file or folder, imported module)
EXCEPTIONS = {
    ("broker/cli.py", "pybroker.clients.admin.commands"),
    ("clients", "pybroker.storage.offline"),
}
PROTOCOL_FORBIDDEN = {"socket", "asyncio", "threading", "selectors", "os", "pathlib", "shutil", "time",
                      "io", "mmap", "tempfile", "glob", "fileinput", "importlib.resources"}
#: the code generator is a build tool that writes files; it is not imported at run time
BUILD_TOOLS = ("codegen",)
#: functions (called by name) that open a file or load code from a file's path
FILE_IO_FUNCTIONS = {"open", "FileIO", "SourceFileLoader", "FileFinder", "spec_from_file_location"}
#: methods that open, read or write a file (`importlib.resources`' too); `read_bytes` only on a call's result
#: (`Path(...).read_bytes()`): on a name it is a file region's own method, which the caller's layer implements
FILE_IO_METHODS = {*FILE_IO_FUNCTIONS, "read_text", "write_text", "write_bytes", "get_data", "files",
                   "open_text", "open_binary", "read_binary", "as_file", "sendfile", "pread", "pwrite"}


def _imports(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
    return names


def _excepted(path: Path, name: str) -> bool:
    return any(name == module and (str(path) == where or path.parts[0] == where) for where, module in EXCEPTIONS)


def test_every_code_folder_is_a_layer() -> None:
    """A new top-level code folder gets its rules here before anything imports it."""
    packages = {d.name for d in ROOT.iterdir() if (d / "__init__.py").exists() and d.name not in {"tests", "bench"}}
    assert packages == set(ALLOWED)


def _file_io(source: str, filename: str = "<source>") -> list[str]:
    """Where `source` opens, reads or writes a file, or loads code from a file's path ("line: what")."""
    found: list[str] = []
    for node in ast.walk(ast.parse(source, filename=filename)):
        if isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in FILE_IO_FUNCTIONS:
                found.append(f"{node.lineno}: {func.id}(...)")
            elif isinstance(func, ast.Attribute) and (
                    func.attr in FILE_IO_METHODS or (func.attr == "read_bytes" and isinstance(func.value, ast.Call))):
                found.append(f"{node.lineno}: .{func.attr}(...)")
        elif (isinstance(node, ast.Attribute) and node.attr == "resources"
              and isinstance(node.value, ast.Name) and node.value.id == "importlib"):
            found.append(f"{node.lineno}: importlib.resources")
    return found


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_layer_imports_only_downwards(layer: str) -> None:
    bad: list[str] = []
    for path in sorted((ROOT / layer).rglob("*.py")):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "pybroker" and len(parts) > 1 and parts[1] not in ALLOWED[layer] \
                    and not _excepted(path.relative_to(ROOT), name):
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
            build_tool = any(part.startswith(BUILD_TOOLS) for part in path.relative_to(ROOT).parts)
            forbidden = any(name == f or name.startswith(f + ".") for f in PROTOCOL_FORBIDDEN)
            if layer == "protocol" and forbidden and not build_tool:
                bad.append(f"{path.relative_to(ROOT)} imports {name} (protocol is sans-I/O)")
    assert not bad, "\n".join(bad)


def test_protocol_does_no_file_io() -> None:
    bad: list[str] = []
    for path in sorted((ROOT / "protocol").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if any(part.startswith(BUILD_TOOLS) for part in relative.parts):
            continue
        bad += [f"{relative}:{where} (protocol is sans-I/O)" for where in _file_io(path.read_text(), str(path))]
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("source", [
    "open('f')", "io.open('f', 'rb')", "Path('f').read_text()", "Path('f').read_bytes()",
    "p.write_text('x')", "importlib.resources.files('pybroker')",
    "SourceFileLoader('m', 'm.py').get_data('m.py')", "importlib.util.spec_from_file_location('m', 'm.py')",
    "with gzip.open('f') as f: pass", "os.sendfile(1, 2, 0, 9)",
])
def test_the_file_io_check_sees(source: str) -> None:
    assert _file_io(source)


@pytest.mark.parametrize("source", ["region.read_bytes()", "struct.unpack_from('>i', buf, 0)", "opened = 1"])
def test_the_file_io_check_passes(source: str) -> None:
    assert not _file_io(source)


def test_every_package_of_the_code_folders_is_installed() -> None:
    """A subpackage missing from pyproject.toml's list works in the editable install and is left out of a
    wheel: every folder with an `__init__.py` under a code folder is listed (and every listed one exists: a
    data-only folder, such as the console's static files, is listed without an `__init__.py`)."""
    import tomllib

    settings = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    found = set()
    for package, folder in settings["package-dir"].items():
        for init in (ROOT / folder).rglob("__init__.py"):
            parts = init.parent.relative_to(ROOT / folder).parts
            found.add(".".join((package, *parts)))
    listed = set(settings["packages"])
    assert found <= listed
    for package in listed - found:
        top = next(p for p in settings["package-dir"] if package.startswith(p + "."))
        assert (ROOT / settings["package-dir"][top]).joinpath(*package[len(top) + 1:].split(".")).is_dir(), package
