"""The fenced code blocks of README.md and docs/*.md, with the doc-test directive that says how each is checked.

Docs are code: every block is run or checked by `tests/integration/test_docs.py`, so a snippet cannot
silently break. A block is preceded (optionally, on the line just before its opening fence) by an HTML
comment that tells the doc test what the block is; without one, a shell block runs and a Python block runs:

| directive | the block is |
|---|---|
| (none) on `sh`/`bash` | a script run with bash, in order with the file's other blocks, against the file's broker |
| (none) on `python` | a script run with the project's Python, likewise |
| (none) on `properties` | a fragment of broker config: every key must be one pybroker knows |
| `<!-- doc-test: synopsis -->` | a usage synopsis: every `pybroker` command and `--option` in it must exist |
| `<!-- doc-test: background -->` | a script that starts a long-running program (a broker): started, waited for, stopped at the end |
| `<!-- doc-test: broker key=value ... -->` | run (as without a directive) against a broker restarted with those overrides |
| `<!-- doc-test: spark -->` | a PySpark script: run like Python, only where Spark can run (Java present) |
| `<!-- doc-test: skip REASON -->` | not run; the reason is required and shows in the test's output |
| `<!-- doc-test: run -->` | as without a directive (a place for the options below) |

Any directive may carry options: `@name=N` names the block; `@uses=N` runs block N of the same document first
(a step that refers to another section's commands), and a named block runs once however often it is used;
`@input=a,b` feeds the lines `a` and `b` to the block's standard input (a prompted password).

Blocks in other languages (`text`, `json`, `console` output, ...) are prose and not checked; a fence must name its
language, so a command cannot hide in an unlabelled block.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^(\s*)```\s*([\w+-]*)\s*$")
DIRECTIVE = re.compile(r"^\s*<!--\s*doc-test:\s*(\w[\w-]*)\s*(.*?)\s*-->\s*$")
KINDS = ("synopsis", "background", "broker", "spark", "skip", "run")
RUN_LANGUAGES = {"sh": "sh", "bash": "sh", "shell": "sh", "python": "python", "py": "python",
                 "properties": "properties"}


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence, 1-based
    language: str  # normalised: sh, python, properties, or the fence's own word
    text: str
    directive: str = ""  # one of KINDS, or "" for the language's default
    argument: str = ""  # the directive's rest without options (skip's reason, broker's overrides)
    options: tuple[tuple[str, str], ...] = ()  # the @key=value options

    def option(self, key: str) -> str | None:
        return dict(self.options).get(key)

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"

    @property
    def checked(self) -> bool:
        return self.language in ("sh", "python", "properties") and self.directive != "skip"


class DocError(ValueError):
    """A doc file the doc test cannot read as intended (an unknown directive, an unclosed fence)."""


def documents() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def blocks_of(path: Path) -> list[Block]:
    lines = path.read_text().splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if match is None:
            i += 1
            continue
        indent, word = match.group(1), match.group(2).lower()
        directive, argument, options = _directive_before(lines, i, path)
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not FENCE.match(lines[j]):
            body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
            j += 1
        if j == len(lines):
            raise DocError(f"{path.name}:{i + 1}: a code fence is never closed")
        found.append(Block(path, i + 1, RUN_LANGUAGES.get(word, word), "\n".join(body) + "\n",
                           directive, argument, options))
        i = j + 1
    return found


def _directive_before(lines: list[str], index: int,
                      path: Path) -> tuple[str, str, tuple[tuple[str, str], ...]]:
    previous = index - 1
    while previous >= 0 and not lines[previous].strip():
        previous -= 1
    if previous < 0:
        return "", "", ()
    match = DIRECTIVE.match(lines[previous])
    if match is None:
        return "", "", ()
    kind = match.group(1)
    words = match.group(2).split()
    options = tuple((word[1:].split("=", 1)[0], word.split("=", 1)[1]) for word in words
                    if word.startswith("@") and "=" in word)
    argument = " ".join(word for word in words if not word.startswith("@"))
    if kind not in KINDS:
        raise DocError(f"{path.name}:{previous + 1}: unknown doc-test directive {kind!r} (one of {KINDS})")
    unknown = {key for key, _ in options} - {"name", "uses", "input"}
    if unknown:
        raise DocError(f"{path.name}:{previous + 1}: unknown doc-test option(s) {sorted(unknown)}")
    if kind == "skip" and not argument:
        raise DocError(f"{path.name}:{previous + 1}: a skipped block must say why")
    return kind, argument, options


def all_blocks() -> list[Block]:
    return [block for path in documents() for block in blocks_of(path)]
