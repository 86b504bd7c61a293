"""docs/configuration.md, generated from the config table: `python -m pybroker.config.docs [--check]`.

The page is derived, never edited by hand, so a key's type, default, valid values or dynamic flag
cannot differ between the loader, DescribeConfigs and the documentation; a test fails when the
committed page is out of date (`make docs` rewrites it).
"""

from __future__ import annotations

import sys
from pathlib import Path

from pybroker.config.definitions import BROKER_DEFS, TOPIC_DEFS, ConfigDef
from pybroker.config.types import render

DOC_PATH = Path("docs") / "configuration.md"

INTRO = """\
# Configuration

Generated from `config/definitions.py` by `make docs`; do not edit by hand.

Keys and defaults are Kafka's, so a Kafka `server.properties` loads as it is. Broker keys come from
`--config server.properties`, then `--override key=value` (and the flags `--log-dirs`, `--listeners`,
`--node-id`). Keys marked **dynamic** can also be changed while the broker runs, with AlterConfigs or
IncrementalAlterConfigs (`kafka-configs.sh --alter --entity-type brokers`, kafka-python's
`alter_configs`, confluent-kafka's `incremental_alter_configs`, or `pybroker topics alter-config`): a
change applies at once and is kept in `pybroker-dynamic-configs.json` in the first log dir, so it
survives restarts. Precedence, highest first: this broker's dynamic value (resource name = node id), the
cluster-wide dynamic default (resource name empty), the static value, the default.

Topic keys are overrides set per topic (CreateTopics, AlterConfigs, IncrementalAlterConfigs, kept in
`pybroker-topics.json`); a topic without an override takes its broker synonym's value (first set one
in the order listed), else the default shown.
"""


def _cell(text: str | None) -> str:
    return "" if text is None else text.replace("|", "\\|")


def _valid(definition: ConfigDef) -> str:
    return (definition.validator.__doc__ or "") if definition.validator else ""


def _default(definition: ConfigDef) -> str:
    text = render(definition.type, definition.default)
    return "null" if text is None else f"`{text}`" if text else '`""`'


def render_markdown() -> str:
    lines = [INTRO, "## Broker configs", "",
             "| key | type | default | valid values | dynamic | description |",
             "| --- | --- | --- | --- | --- | --- |"]
    for d in sorted(BROKER_DEFS, key=lambda d: d.key):
        lines.append(f"| `{d.key}` | {d.type} | {_cell(_default(d))} | {_cell(_valid(d))} | "
                     f"{'yes' if d.dynamic else 'no'} | {_cell(d.doc)} |")
    lines += ["", "## Topic configs", "",
              "| key | type | default | valid values | broker synonyms | description |",
              "| --- | --- | --- | --- | --- | --- |"]
    for d in sorted(TOPIC_DEFS, key=lambda d: d.key):
        synonyms = ", ".join(f"`{key}`" + (f" (x{multiplier})" if multiplier != 1 else "")
                             for key, multiplier in d.synonyms)
        lines.append(f"| `{d.key}` | {d.type} | {_cell(_default(d))} | {_cell(_valid(d))} | {synonyms} | "
                     f"{_cell(d.doc)} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    path = Path(argv[argv.index("--path") + 1]) if "--path" in argv else DOC_PATH
    text = render_markdown()
    if "--check" in argv:
        if not path.exists() or path.read_text() != text:
            print(f"{path} is out of date: run make docs", file=sys.stderr)
            return 1
        return 0
    path.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
