"""The `pybroker` command line.

`pybroker start` takes Kafka's config keys from a `server.properties` file and from `--override
key=value`, with the common ones also as flags. Any bad flag or value ends the program with exit status 2
and one line naming the key; no traceback.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import click

from pybroker.config.broker_config import BrokerConfig
from pybroker.config.properties import load_properties
from pybroker.config.types import ConfigError


def _fail(message: str) -> None:
    click.echo(f"pybroker: error: {message}", err=True)
    sys.exit(2)


def _parse_overrides(pairs: tuple[str, ...]) -> dict[str, str]:
    """`--override key=value`s. An unknown key here is a typo on a command line someone just typed: refused
    with the nearest keys. (In a `server.properties` it stays a warning, as in Kafka: such files carry
    keys of other brokers' features.)"""
    from pybroker.config.broker_config import broker_definition

    overrides: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            _fail(f"--override expects key=value, got {pair!r}")
        key = key.strip()
        per_mechanism = re.fullmatch(r"listener\.name\.[\w-]+\.[\w-]+\.(sasl\..+)", key)  # Kafka's ...plain.sasl.jaas.config
        if broker_definition(key) is None and not (per_mechanism and broker_definition(per_mechanism.group(1))):
            _fail(f"--override: unknown config key {key!r}{_did_you_mean(key)}")
        overrides[key] = value.strip()
    return overrides


def _did_you_mean(key: str) -> str:
    from difflib import get_close_matches

    from pybroker.config.definitions import BROKER, TOPIC

    near = get_close_matches(key, list(BROKER), n=3, cutoff=0.75)
    if key in TOPIC:  # a topic key: the broker's default for it is another key (retention.ms, log.retention.ms)
        near = [k for k in BROKER if k == f"log.{key}" or k.endswith(f".{key}")][:1] + near
        return f" (a topic config: set it per topic; did you mean {' or '.join(dict.fromkeys(near))}?)" if near \
            else " (a topic config: set it per topic with `pybroker topics create --config` or `topics alter`)"
    return f" (did you mean {' or '.join(near)}?)" if near else " (`pybroker configs keys --scope broker` lists them)"


class _Commands(click.Group):
    """`start` plus the admin tools, which are imported only when a command line names one of them (or
    asks for the list): the broker's own start then skips their imports, ~0.1 s of every start."""

    _admin_added = False

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        found = super().get_command(ctx, cmd_name)
        if found is None and not self._admin_added:
            self._add_admin_commands()
            found = super().get_command(ctx, cmd_name)
        return found

    def list_commands(self, ctx: click.Context) -> list[str]:
        self._add_admin_commands()
        return super().list_commands(ctx)

    def _add_admin_commands(self) -> None:
        """`topics`, `groups`, `produce`, `consume`, `log-dirs`, `configs`, `health`, ...: see
        pybroker.clients.admin (the clients package; the server imports it only here)."""
        if self._admin_added:
            return
        self._admin_added = True
        from pybroker.clients.admin.commands import ADMIN_COMMANDS

        for command in ADMIN_COMMANDS:
            self.add_command(command)


@click.group(cls=_Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="pybroker", prog_name="pybroker", message="%(prog)s %(version)s")
def cli() -> None:
    """pybroker: a single-node broker that speaks the Apache Kafka protocol.

    `start` runs the broker; the other commands are its tools (see docs/cli.md). Shell completion:
    eval "$(pybroker completion bash)" (or zsh, fish)."""


def _import_structlog_without_rich() -> None:
    """Import structlog with `rich` hidden, before anything else imports either: structlog's console
    renderer and traceback modules import rich when it is installed (pyiceberg brings it, not we) to draw
    exceptions, but the broker formats exceptions as plain text first (`format_exc_info` in
    `broker/loggers/structlog_setup.py`), so rich never draws anything here, and importing it was about 50
    ms of the ~0.4 s of CPU a start costs. Only this import is hidden: rich imports as usual afterwards."""
    if "structlog" in sys.modules or "rich" in sys.modules:
        return
    sys.modules["rich"] = None  # type: ignore[assignment]  # `import rich` raises ImportError meanwhile
    try:
        import structlog.dev
        import structlog.tracebacks  # noqa: F401
    finally:
        if "rich" in sys.modules and sys.modules["rich"] is None:
            del sys.modules["rich"]


@cli.command()
@click.option("--log-dirs", help="Comma-separated log directories (log.dirs).")
@click.option("--listeners", help="Listeners, e.g. PLAINTEXT://127.0.0.1:9092 (listeners).")
@click.option("--config", "config_file", type=click.Path(dir_okay=False), help="A server.properties file.")
@click.option("--override", "overrides", multiple=True, metavar="KEY=VALUE", help="Any config key; repeatable.")
@click.option("--metrics-port", type=click.IntRange(0, 65535),
              help="Serve /metrics (Prometheus), /healthz and /readyz on this port.")
@click.option("--metrics-host", default="127.0.0.1", show_default=True,
              help="Address of the metrics port (0.0.0.0 in a container).")
@click.option("--console-port", type=click.IntRange(0, 65535),
              help="Serve the web console on this port too (console.port; console.host binds it, 127.0.0.1 by default).")
@click.option("--node-id", type=click.IntRange(0), help="The node id (node.id).")
@click.option("--log-format", type=click.Choice(["json", "console"]), default=None,
              help="Log format (default: json unless stdout is a terminal).")
@click.option("--log-level", type=click.Choice(["debug", "info", "warning", "error"]), default="info")
def start(log_dirs: str | None, listeners: str | None, config_file: str | None, overrides: tuple[str, ...],
          metrics_port: int | None, metrics_host: str, console_port: int | None, node_id: int | None,
          log_format: str | None, log_level: str) -> None:
    """Start the broker and serve until SIGTERM or SIGINT."""
    from pybroker.broker import startup_gc

    startup_gc.pause()  # turned on again once the listeners answer (`BrokerApp.serve`)
    from pybroker.broker import dataclass_code

    dataclass_code.install()  # released with the collector's pause
    _import_structlog_without_rich()
    from pybroker.broker.loggers.structlog_setup import configure_logging

    configure_logging(log_format, log_level)
    layers: list[dict[str, str]] = []
    if config_file:
        try:
            layers.append(load_properties(Path(config_file)))
        except OSError as exc:
            _fail(f"--config: cannot read {config_file}: {exc.strerror or exc}")
    layers.append(_parse_overrides(overrides))
    flags = {"log.dirs": log_dirs, "listeners": listeners, "node.id": None if node_id is None else str(node_id),
             "console.port": None if console_port is None else str(console_port)}
    layers.append({k: v for k, v in flags.items() if v is not None})
    try:
        config = BrokerConfig.load(*layers)
    except ConfigError as exc:
        _fail(str(exc))
        return
    _run(config, metrics_port, metrics_host)


@cli.command("export-kraft")
@click.option("--log-dirs", required=True, help="Comma-separated log directories of the stopped broker.")
@click.option("--node-id", type=click.IntRange(0),
              help="The node id the dirs belong to (default: what their meta.properties says).")
@click.option("--metadata-dir", type=click.Path(file_okay=False, path_type=Path),
              help="Write the metadata log here (a controller-only Kafka node's dir) instead of the first log dir.")
@click.option("--controller-id", type=click.IntRange(0),
              help="The node id of the controller that owns --metadata-dir (its meta.properties).")
def export_kraft(log_dirs: str, node_id: int | None, metadata_dir: Path | None, controller_id: int | None) -> None:
    """Write a stopped pybroker's topics, configs, ACLs, SCRAM users, quotas and producer ids as one KRaft
    metadata snapshot: into a controller-only Kafka node's dir (--metadata-dir), or in place of the live metadata
    log of the first log dir, which a combined Kafka node already reads without this step (docs/migrating.md).
    Prints counts only."""
    from pybroker.broker.kraft_export import export_kraft as run_export
    from pybroker.storage.errors import StorageError

    try:
        result, counts = run_export([Path(d) for d in log_dirs.split(",") if d], node_id, metadata_dir,
                                    controller_id)
    except (StorageError, OSError) as exc:
        _fail(f"export-kraft: {exc}")
        return
    click.echo(f"wrote {result.snapshot} (cluster.id {result.cluster_id}): {result.topics} topics, "
               f"{result.partitions} partitions, " + ", ".join(f"{n} {kind.replace('_', ' ')}" for kind, n in counts.items()))


def _run(config: BrokerConfig, metrics_port: int | None, metrics_host: str = "127.0.0.1") -> None:
    import uvloop

    from pybroker.broker.app import run_broker
    from pybroker.broker.loggers.structlog_setup import get_logger
    from pybroker.storage.errors import StorageError

    log = get_logger("pybroker.cli")
    try:
        code = uvloop.run(run_broker(config, metrics_port=metrics_port, metrics_host=metrics_host))
        if code:
            sys.exit(code)
    except ConfigError as exc:  # e.g. TLS material or SASL settings that do not load: the key, never a secret
        _fail(str(exc))
    except StorageError as exc:
        log.error("cannot start", error=str(exc))
        sys.exit(1)
    except OSError as exc:
        log.error("cannot start", error=str(exc))
        sys.exit(1)
    except KeyboardInterrupt:
        pass


def _fail_as_asked(message: str) -> None:
    """A usage error: one line, a JSON object when the command line asked for --json."""
    if "--json" in sys.argv[1:]:
        click.echo(json.dumps({"error": message, "kafka_error": None}), err=True)
        sys.exit(2)
    _fail(message)


def main() -> None:
    try:
        cli.main(standalone_mode=False, prog_name="pybroker")
    except click.exceptions.Abort:
        sys.exit(130)
    except click.exceptions.NoArgsIsHelpError as exc:  # a bare `pybroker` or `pybroker groups`: its help, as asked
        click.echo(exc.ctx.get_help() if exc.ctx is not None else exc.format_message())
        sys.exit(0)
    except click.UsageError as exc:
        _fail_as_asked(exc.format_message().replace("\n", " "))
    except click.ClickException as exc:
        _fail_as_asked(exc.format_message())


if __name__ == "__main__":
    main()

