"""The CRC-32C function is the `crc32c` package's own, loaded without running the package's `__init__`."""

from __future__ import annotations

import subprocess
import sys

import crc32c
import pytest
from hypothesis import given
from hypothesis import strategies as st

from pybroker.storage import crc32c_extension
from pybroker.storage.crc32c_extension import crc32c_function

FUNCTION = crc32c_function()


def test_the_check_value_of_crc32c() -> None:
    assert FUNCTION(b"123456789") == 0xE3069283  # the catalogue's check value for CRC-32C


@given(st.binary(max_size=4096))
def test_it_is_the_package_function(data: bytes) -> None:
    assert FUNCTION(data) == crc32c.crc32c(data)
    assert FUNCTION(memoryview(data)) == crc32c.crc32c(data)


def test_loading_it_does_not_import_the_package() -> None:
    """The package's `__init__` reads the installed distributions' metadata: the cost this module avoids."""
    script = ("import sys\nfrom pybroker.protocol.records.batch import crc32c_of\n"
              "from pybroker.storage import crc32c_extension\ncrc32c_extension.install()\n"
              "assert crc32c_of(b'123456789') == 0xE3069283\n"
              "print('crc32c' in sys.modules, 'importlib.metadata' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]


def test_a_package_laid_out_otherwise_is_imported_as_usual(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(crc32c_extension, "EXTENSION", "_no_such_module")
    assert crc32c_function() is crc32c.crc32c
