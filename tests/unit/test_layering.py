"""The layers import only downwards: broker -> storage -> protocol; clients -> protocol, config; config
depends on nothing.

`clients` (the admin commands, the Spark connector, the wire client) runs outside the broker process: it
never imports the server, and of storage only `storage.offline` (the file formats the offline tools
read). The server never imports the clients, except the one command-line entry point that hands every
command but `start` to them. `protocol` is sans-I/O, so it may not import sockets, asyncio, threads or
file-system modules either.
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
PROTOCOL_FORBIDDEN = {"socket", "asyncio", "threading", "selectors", "os", "pathlib", "shutil", "time"}
#: the code generator is a build tool that writes files; it is not imported at run time
BUILD_TOOLS = ("codegen",)


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
            if layer == "protocol" and parts[0] in PROTOCOL_FORBIDDEN and not build_tool:
                bad.append(f"{path.relative_to(ROOT)} imports {name} (protocol is sans-I/O)")
    assert not bad, "\n".join(bad)
