"""The broker never loads the connector (nor pyspark), and the connector's pure modules need no Spark."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[4]
CONNECTOR = ROOT / "clients" / "spark"


def _loads(modules: list[str]) -> set[str]:
    """Top-level packages loaded by importing `modules` in a fresh interpreter."""
    code = ("import sys\n" + "".join(f"import {m}\n" for m in modules)
            + "print(' '.join(sorted({name.split('.')[0] for name in sys.modules})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    return set(out.stdout.split())


def test_the_broker_does_not_import_pyspark() -> None:
    loaded = _loads(["pybroker.broker.app", "pybroker.broker.cli", "pybroker.broker.dispatch"])
    assert "pyspark" not in loaded and "pyarrow" not in loaded


def test_no_broker_module_imports_the_connector() -> None:
    bad = []
    for path in sorted((ROOT / "broker").rglob("*.py")):
        if CONNECTOR in path.parents:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{path.relative_to(ROOT)} imports {n}" for n in names if n.startswith("pybroker.clients.spark")]
    assert not bad, "\n".join(bad)


def test_pure_connector_modules_import_without_spark_or_a_client() -> None:
    loaded = _loads(["pybroker.clients.spark", "pybroker.clients.spark.options", "pybroker.clients.spark.planning",
                     "pybroker.clients.spark.exactly_once"])
    assert not loaded & {"pyspark", "pyarrow", "kafka"}


def test_the_transactional_client_uses_only_the_protocol_package() -> None:
    """The exactly-once sink and the reader's fetch path are clients: of pybroker they may import `protocol`,
    never broker internals."""
    modules = ["wire", "cluster", "txn_producer", "exactly_once", "fetch_reader", "record_set", "arrow_records",
               "arrow_records_py"]
    bad = []
    for name in modules:
        path = CONNECTOR / f"{name}.py" if name != "wire" else CONNECTOR.parent / "wire.py"
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            bad += [f"{name} imports {n}" for n in names if n.startswith("pybroker.")
                    and not n.startswith(("pybroker.protocol", "pybroker.clients"))]
    assert not bad, "\n".join(bad)
