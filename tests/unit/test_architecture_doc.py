"""docs/architecture.md names only what exists: every repository path and `pybroker.*` module it mentions.

The design document is the map of the code as it is, so a module moved or renamed without updating the
map fails here. What counts as a name: inside inline code spans and fenced blocks, every word that starts
with one of the repository's top-level entries followed by `/` (`storage/log.py`, `broker/handlers/`,
`protocol/schema/*.py` for a pattern that must match something) or is a top-level file (`Makefile`), and
every dotted module name under `pybroker.` or `tests.` (`pybroker.storage.log`, `python -m tests.fuzz.seeds`).
Placeholders (`protocol/messages/<name>.py`) are not names. Relative links of the document must resolve too,
and the README must link to the document.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "architecture.md"
#: the folders installed as `pybroker.<name>` (pyproject's package-dir)
PACKAGES = ("broker", "storage", "protocol", "config", "clients")

INLINE_CODE = re.compile(r"`([^`\n]+)`")
FENCED = re.compile(r"^```[\w+-]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
LINK = re.compile(r"\]\(([^)\s]+)\)")
DOTTED = re.compile(r"(?<![\w.])((?:pybroker|tests)(?:\.\w+)+)")


def _top_level() -> tuple[set[str], set[str]]:
    """The repository's top-level folders and files, without hidden ones (`.venv` is not the project's)."""
    entries = [entry for entry in ROOT.iterdir() if not entry.name.startswith(".")]
    return {e.name for e in entries if e.is_dir()}, {e.name for e in entries if e.is_file()}


def _code_texts(text: str) -> list[str]:
    blocks = [match.group(1) for match in FENCED.finditer(text)]
    prose = FENCED.sub("", text)
    return blocks + [match.group(1) for match in INLINE_CODE.finditer(prose)]


def named_paths(text: str) -> set[str]:
    folders, files = _top_level()
    path = re.compile(r"(?<![\w./<>-])((?:" + "|".join(map(re.escape, sorted(folders))) + r")/[\w./*-]*)")
    found: set[str] = set()
    for code in _code_texts(text):
        for match in path.finditer(code):
            end = match.end()
            if end < len(code) and code[end] in "<>":  # `protocol/messages/<name>.py`: a placeholder
                continue
            found.add(match.group(1).rstrip("."))
        found |= {word for word in re.findall(r"[\w.-]+", code) if word in files}
    return found


def named_modules(text: str) -> set[str]:
    return {match.group(1) for code in _code_texts(text) for match in DOTTED.finditer(code)}


def module_exists(name: str) -> bool:
    parts = name.split(".")
    if parts[0] == "pybroker":
        if len(parts) < 2 or parts[1] not in PACKAGES:
            return False
        parts = parts[1:]
    base = ROOT.joinpath(*parts)
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def path_exists(name: str) -> bool:
    if "*" in name:
        return any(ROOT.glob(name))
    return (ROOT / name).exists()


def test_every_path_the_document_names_exists() -> None:
    paths = named_paths(DOC.read_text())
    assert len(paths) > 50, f"the extraction found only {len(paths)} paths: has the document's form changed?"
    missing = sorted(name for name in paths if not path_exists(name))
    assert not missing, f"docs/architecture.md names paths that do not exist: {missing}"


def test_every_module_the_document_names_exists() -> None:
    modules = named_modules(DOC.read_text())
    assert modules, "the document names no pybroker module"
    missing = sorted(name for name in modules if not module_exists(name))
    assert not missing, f"docs/architecture.md names modules that do not exist: {missing}"


def test_every_relative_link_resolves() -> None:
    links = [link for link in LINK.findall(DOC.read_text()) if "://" not in link and not link.startswith("#")]
    missing = sorted(link for link in links if not (DOC.parent / link.split("#", 1)[0]).exists())
    assert not missing, f"docs/architecture.md links to nothing: {missing}"


def test_the_readme_links_to_the_document() -> None:
    assert "](docs/architecture.md)" in (ROOT / "README.md").read_text()


# -- the extraction itself --------------------------------------------------------------------------------
def test_extraction_finds_paths_and_modules_in_code_only() -> None:
    text = ("The storage/log.py in prose is not a name. See `storage/log.py` and `broker/handlers/`, "
            "`python -m pybroker.protocol.codegen --check`, `protocol/messages/<name>.py` and `Makefile`.\n"
            "```text\n<log dir>/\n  .lock   (storage/log_dir.py)\n```\n")
    assert named_paths(text) == {"storage/log.py", "broker/handlers/", "storage/log_dir.py", "Makefile"}
    assert named_modules(text) == {"pybroker.protocol.codegen"}


def test_a_missing_name_is_caught() -> None:
    assert not path_exists("storage/no_such_module.py")
    assert not path_exists("protocol/schema/*.no_such_suffix")
    assert path_exists("protocol/schema/*.py")
    assert module_exists("pybroker.storage.log") and module_exists("pybroker.storage.cleaner")
    assert module_exists("tests.fuzz.seeds")
    assert not module_exists("pybroker.storage.no_such_module")
    assert not module_exists("pybroker.tests.fuzz")  # tests are not installed under pybroker
