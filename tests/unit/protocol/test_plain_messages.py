"""The generated plain message classes (every interpreted messages module) answer as the `@dataclass`
classes they replaced did: fields, `replace`, `asdict`, equality, repr, unhashable; and the modules left
with `@dataclass` are exactly the ones setup.py compiles."""

from __future__ import annotations

import ast
import dataclasses
import importlib
import pkgutil
from pathlib import Path

from pybroker.protocol import codegen, messages
from pybroker.protocol.messages.add_partitions_to_txn import (
    AddPartitionsToTxnRequest,
    AddPartitionsToTxnTopic,
    AddPartitionsToTxnTransaction,
)
from pybroker.protocol.messages.end_txn import EndTxnRequest

REPO = Path(__file__).resolve().parents[3]


def _setup_compiled_messages() -> set[str]:
    tree = ast.parse((REPO / "setup.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "COMPILED_MODULES" for t in node.targets):
            names = ast.literal_eval(node.value)
            prefix = "pybroker.protocol.messages."
            return {n.removeprefix(prefix) for n in names if n.startswith(prefix)}
    raise AssertionError("setup.py has no COMPILED_MODULES")


def test_codegen_keeps_dataclasses_exactly_where_setup_compiles() -> None:
    assert set(codegen.COMPILED) == _setup_compiled_messages()


def test_a_plain_class_has_the_dataclass_face() -> None:
    assert "__dataclass_params__" not in vars(EndTxnRequest)  # not made by @dataclass
    assert dataclasses.is_dataclass(EndTxnRequest)
    fields = dataclasses.fields(EndTxnRequest)
    assert [(f.name, f.type, f.default) for f in fields] == [
        ("transactional_id", "str", ""), ("producer_id", "int", 0), ("producer_epoch", "int", 0),
        ("committed", "bool", False)]
    request = EndTxnRequest("t", 7, 1, True)
    assert dataclasses.replace(request, committed=False) == EndTxnRequest("t", 7, 1, False)
    assert dataclasses.asdict(request) == {"transactional_id": "t", "producer_id": 7, "producer_epoch": 1,
                                           "committed": True}
    assert repr(request) == "EndTxnRequest(transactional_id='t', producer_id=7, producer_epoch=1, committed=True)"
    assert request != EndTxnRequest("t", 7, 1, False) and request != ("t", 7, 1, True)
    assert EndTxnRequest.__hash__ is None
    assert not hasattr(request, "__dict__")


def test_fresh_defaults_are_factories_and_nested_structs_compare_deeply() -> None:
    fields = {f.name: f for f in dataclasses.fields(AddPartitionsToTxnTransaction)}
    assert fields["topics"].default is dataclasses.MISSING and fields["topics"].default_factory() == []
    assert fields["topics"].type == "list[AddPartitionsToTxnTopic]"
    one = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        "t", topics=[AddPartitionsToTxnTopic("a", [0, 1])])])
    two = AddPartitionsToTxnRequest(transactions=[AddPartitionsToTxnTransaction(
        "t", topics=[AddPartitionsToTxnTopic("a", [0, 1])])])
    assert one == two and one.transactions is not two.transactions
    assert AddPartitionsToTxnTransaction().topics is not AddPartitionsToTxnTransaction().topics


def test_every_plain_class_builds_its_fields_from_its_own_instance() -> None:
    checked = 0
    for info in pkgutil.iter_modules(messages.__path__):
        if info.name in codegen.COMPILED:
            continue
        module = importlib.import_module(f"{messages.__name__}.{info.name}")
        for cls in vars(module).values():
            if isinstance(cls, type) and cls.__module__ == module.__name__ and "__slots__" in cls.__dict__:
                names = [f.name for f in dataclasses.fields(cls)]
                assert names == list(cls.__slots__) == list(cls.__match_args__)
                assert cls() == dataclasses.replace(cls())
                checked += 1
    assert checked > 250
