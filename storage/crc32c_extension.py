"""The `crc32c` package's C function, loaded without running the package's `__init__`.

Why: `import crc32c` runs the package's `__init__`, which looks its own version up in the installed
distributions' metadata (importing `importlib.metadata`) and imports its command line (`argparse`): 22 of
the 23 ms its import took at a broker's start, which needs the function before it serves (the live
metadata log's batches are checked, or its first snapshot written). The function lives in the package's
extension module `crc32c._crc32c`; it is loaded here straight from the package's directory, found with
`importlib.util.find_spec`, which locates a top-level package without running it. Anything unexpected
(another layout, another version of the package) falls back to the plain import: the same function.

`install` hands it to the protocol layer (`protocol/records/batch.py`, which is sans-I/O and would
otherwise import the package at its first CRC).

Threads: any; called once, at a broker's start (`BrokerApp.start`), before the logs load.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
from collections.abc import Callable
from typing import Any

from pybroker.protocol.records.batch import install_crc32c

#: the package, and the extension module in it that holds the function
PACKAGE = "crc32c"
EXTENSION = "_crc32c"


def install() -> None:
    """From now on every CRC-32C of the protocol layer is this module's function."""
    install_crc32c(crc32c_function())


def crc32c_function() -> Callable[[Any], int]:
    """`crc32c.crc32c`, from its extension module when it can be loaded alone, else by importing the package."""
    try:
        loaded = _from_extension()
    except (ImportError, OSError, AttributeError, ValueError):
        loaded = None
    if loaded is not None:
        return loaded
    import crc32c

    function: Callable[[Any], int] = crc32c.crc32c
    return function


def _from_extension() -> Callable[[Any], int] | None:
    spec = importlib.util.find_spec(PACKAGE)
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    name = f"{PACKAGE}.{EXTENSION}"
    for directory in locations:
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.join(directory, EXTENSION + suffix)
            if not os.path.isfile(path):
                continue
            loader = importlib.machinery.ExtensionFileLoader(name, path)
            extension_spec = importlib.util.spec_from_file_location(name, path, loader=loader)
            if extension_spec is None:
                return None
            module = importlib.util.module_from_spec(extension_spec)
            loader.exec_module(module)
            function: Callable[[Any], int] = module.crc32c
            return function
    return None
