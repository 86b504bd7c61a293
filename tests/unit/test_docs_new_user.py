"""What a new user following README.md and the docs it links tripped over (issue 29), held true: the
README says why one would use pybroker and what it needs near the top, names the `lib-pybroker` clash,
gives an install command for the Spark extra that works from a checkout, the security short path's broker
runs beside `make run`'s, and the consumer-protocol "Try it" runs with a client that speaks it."""

from __future__ import annotations

import re

from tests.doc_blocks import ROOT, blocks_of

README = ROOT / "README.md"


def _make_run_ports() -> set[int]:
    makefile = (ROOT / "Makefile").read_text()
    recipe = makefile.split("\nrun:", 1)[1].split("\n\n", 1)[0]
    return {int(port) for port in re.findall(r"(?::|--metrics-port |--console-port )(\d{2,5})\b", recipe)}


def test_the_readme_says_why_and_what_it_needs_near_the_top() -> None:
    top = "\n".join(README.read_text().splitlines()[:30])
    for words in ("Why use it", "Python\n3.11", "C compiler", "Python headers", "lib-pybroker", "own venv"):
        assert words.replace("\n", " ") in top.replace("\n", " "), words


def test_no_install_command_asks_an_index_for_pybroker() -> None:
    """pybroker is not on PyPI: `pip install 'pybroker[...]'` as an instruction fails (or finds another
    project); the working command installs this checkout."""
    text = README.read_text()
    for match in re.finditer(r"`[^`]*pip install [^`]*pybroker[^`]*`", text):
        assert "finds nothing" in text[match.end():match.end() + 80], match.group(0)
    assert ".venv/bin/pip install -e '.[spark]'" in text


def test_the_security_short_path_runs_beside_make_run() -> None:
    path = ROOT / "docs" / "security.md"
    text = path.read_text()
    short = text[text.index("## The short path"):text.index("\n## ", text.index("## The short path") + 5)]
    ports = {int(p) for p in re.findall(r"(?:listeners=|,)[A-Z_]+://[\w.]*:(\d+)", short)}
    assert ports, "the short path's broker names its listeners"
    taken = _make_run_ports()
    assert taken and not ports & taken, f"ports {sorted(ports & taken)} are make run's too"


def test_the_consumer_protocol_try_it_runs_and_needs_no_kcat() -> None:
    path = ROOT / "docs" / "consumer-groups.md"
    text = path.read_text()
    try_it = text[text.index("## Try it"):text.index("\n## ", text.index("## Try it"))]
    blocks = [b for b in blocks_of(path) if b.text in try_it]
    assert blocks and all(b.checked for b in blocks), "the Try it section's blocks are run by the doc test"
    assert not any("kcat" in b.text and "group.protocol=consumer" in b.text for b in blocks)
    assert any("group.protocol" in b.text and "groups\", \"describe" in b.text for b in blocks)
