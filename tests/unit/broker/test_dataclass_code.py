"""The dataclasses' method code kept beside the bytecode: the same classes, without compiling their methods."""

from __future__ import annotations

import dataclasses
import marshal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pybroker.broker import dataclass_code


@pytest.fixture(autouse=True)
def _released() -> Iterator[None]:
    yield
    dataclass_code.release()
    dataclass_code._compiled = None


def _define() -> Any:
    @dataclasses.dataclass(frozen=True, slots=True, order=True)
    class Point:
        x: int
        y: int = 0
        tags: tuple[str, ...] = dataclasses.field(default_factory=tuple)

    return Point


def _recorded(tmp_path: Path) -> Path:
    """A file holding the texts `_define` compiles (recorded as `build` records a start's)."""
    dataclass_code._compiled = {}
    dataclasses.exec = dataclass_code._exec  # type: ignore[attr-defined]
    _define()
    texts, dataclass_code._compiled = dataclass_code._compiled, None
    dataclass_code.release()
    assert len(texts) >= 5  # __init__, __repr__, __eq__, the order methods, __setattr__, ...
    path = tmp_path / "code.marshal"
    path.write_bytes(marshal.dumps(texts))
    return path


def test_a_class_gets_the_same_methods_from_the_kept_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _define()
    path = _recorded(tmp_path)
    assert dataclass_code.install(path)
    ran: list[type] = []
    real_exec = dataclass_code.builtins.exec

    def recording(source: Any, *args: Any) -> None:
        ran.append(type(source))
        real_exec(source, *args)

    monkeypatch.setattr(dataclass_code.builtins, "exec", recording)
    kept = _define()
    monkeypatch.undo()
    assert ran and str not in ran  # every method came from the file: nothing was compiled
    for cls in (plain, kept):
        a, b = cls(1, 2), cls(1, 3, ("t",))
        assert (a == cls(1, 2), a < b, hash(a) == hash(cls(1, 2))) == (True, True, True)
        assert repr(b) == "_define.<locals>.Point(x=1, y=3, tags=('t',))"
        with pytest.raises(dataclasses.FrozenInstanceError):
            a.x = 5  # type: ignore[misc]
        assert cls.__slots__ == ("x", "y", "tags")
    assert [f.name for f in dataclasses.fields(kept)] == [f.name for f in dataclasses.fields(plain)]


def test_a_text_the_file_lacks_is_compiled_as_before(tmp_path: Path) -> None:
    path = tmp_path / "code.marshal"
    path.write_bytes(marshal.dumps({}))
    assert dataclass_code.install(path)

    @dataclasses.dataclass
    class Other:
        name: str

    assert Other("a") == Other("a") and repr(Other("b")) == \
        "test_a_text_the_file_lacks_is_compiled_as_before.<locals>.Other(name='b')"


@pytest.mark.parametrize("content", [None, b"", b"\x00garbage", marshal.dumps([1, 2])], ids=[
    "missing", "empty", "garbage", "not-a-table"])
def test_a_file_that_cannot_be_read_leaves_dataclasses_alone(tmp_path: Path, content: bytes | None) -> None:
    path = tmp_path / "code.marshal"
    if content is not None:
        path.write_bytes(content)
    assert not dataclass_code.install(path)
    assert not hasattr(dataclasses, "exec")
    point = _define()
    assert point(1) == point(1)


def test_release_gives_dataclasses_back_their_builtin(tmp_path: Path) -> None:
    assert dataclass_code.install(_recorded(tmp_path))
    assert dataclasses.exec is dataclass_code._exec  # type: ignore[attr-defined]
    dataclass_code.release()
    assert not hasattr(dataclasses, "exec") and not dataclass_code._codes


def test_the_build_keeps_what_a_start_compiles(tmp_path: Path) -> None:
    """In a fresh interpreter (as `make bytecode` runs it): the texts of the broker's own classes."""
    path = tmp_path / "start.marshal"
    done = subprocess.run([sys.executable, "-c", "import sys; from pathlib import Path; "
                           "from pybroker.broker.dataclass_code import build; print(build(Path(sys.argv[1])))",
                           str(path)], capture_output=True, text=True, timeout=120, check=True)
    codes = marshal.loads(path.read_bytes())
    assert int(done.stdout) == len(codes) > 300
    assert any("self.topic_id" in text for text in codes)  # the broker's TopicInfo, among others
    assert not list(tmp_path.glob("*.tmp"))
