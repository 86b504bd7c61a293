"""What every admin command shares: the wire options, failures as one line (or one JSON object), progress bars.

- `wire_command` gives a command `--bootstrap-server` (a comma-separated list, as Kafka's tools take;
  default from `PYBROKER_BOOTSTRAP_SERVER`, else 127.0.0.1:9092), `--json`, `--timeout` and
  `--command-config`, and hands it a connected `WireClient` as `client`.
- `fail` ends the command with exit status 1 and one `pybroker: error: ...` line on stderr; under
  `--json` that line is a JSON object instead (`{"error": ..., "kafka_error": ...}`), so a script that
  asked for JSON never has to parse prose.
- `progress` is click's progress bar on stderr, shown only to a person: never under `--json` and never
  when stderr is not a terminal (a pipe or a log file gets no bar characters).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn, Protocol, TypeVar

import click

from pybroker.clients.client_config import ClientConfigError, ClientSecurity, load_client_security
from pybroker.clients.wire import DEFAULT_BOOTSTRAP, WireClient, WireError, parse_bootstrap_list

F = TypeVar("F", bound=Callable[..., Any])

BOOTSTRAP_ENV = "PYBROKER_BOOTSTRAP_SERVER"


def json_requested() -> bool:
    """Whether the running command was asked for JSON (its `--json` flag)."""
    ctx = click.get_current_context(silent=True)
    while ctx is not None:
        if ctx.params.get("as_json"):
            return True
        ctx = ctx.parent
    return False


def error_line(message: str, kafka_error: str | None = None, *, as_json: bool) -> str:
    if as_json:
        return json.dumps({"error": message, "kafka_error": kafka_error})
    return f"pybroker: error: {message}"


def fail(message: str, kafka_error: str | None = None, *, code: int = 1) -> NoReturn:
    click.echo(error_line(message, kafka_error, as_json=json_requested()), err=True)
    sys.exit(code)


def warn(message: str) -> None:
    if json_requested():
        click.echo(json.dumps({"warning": message}), err=True)
    else:
        click.echo(f"pybroker: warning: {message}", err=True)


def wire_options(fn: F) -> F:
    """The options every command that talks to the broker takes (a group passes them to its default)."""
    fn = click.option("--command-config", "command_config", type=click.Path(dir_okay=False, path_type=Path),
                      default=None, metavar="FILE",
                      help="Client security settings (security.protocol, sasl.mechanism, sasl.jaas.config).")(fn)
    fn = click.option("--timeout", default=10.0, show_default=True, type=click.FloatRange(0, min_open=True),
                      help="Seconds to wait for the broker.")(fn)
    fn = click.option("--json", "as_json", is_flag=True,
                      help="Print JSON instead of a table (errors too, on stderr).")(fn)
    return click.option("--bootstrap-server", "bootstrap", default=DEFAULT_BOOTSTRAP, show_default=True,
                        envvar=BOOTSTRAP_ENV, show_envvar=True, metavar="HOST:PORT[,HOST:PORT...]",
                        callback=_checked_bootstrap,
                        help="The broker to talk to (the first of the list that answers).")(fn)


def _checked_bootstrap(ctx: click.Context, param: click.Parameter, value: str) -> str:
    """An address that does not parse is a bad command line (exit 2, docs/cli.md), not a failed command."""
    try:
        parse_bootstrap_list(value)
    except WireError as exc:
        raise click.BadParameter(str(exc).removeprefix("--bootstrap-server "), ctx, param) from None
    return value


def wire_command(fn: F) -> F:
    """--bootstrap-server, --json and --timeout, a connected client as `client`, and errors as one line."""

    @wire_options
    @functools.wraps(fn)
    def wrapper(bootstrap: str, as_json: bool, timeout: float, command_config: Path | None, **kwargs: Any) -> None:
        with _one_line_errors(bootstrap, timeout):
            security = load_client_security(command_config) if command_config else ClientSecurity()
            with WireClient(bootstrap, timeout, security) as client:
                fn(client=client, as_json=as_json, **kwargs)

    return wrapper  # type: ignore[return-value]


def wire_connector(fn: F) -> F:
    """As `wire_command`, but the command connects itself (when it wants to retry): it gets `connect`, a
    function returning a new connected `WireClient` (or raising `WireError`)."""

    @wire_options
    @functools.wraps(fn)
    def wrapper(bootstrap: str, as_json: bool, timeout: float, command_config: Path | None, **kwargs: Any) -> None:
        with _one_line_errors(bootstrap, timeout):
            security = load_client_security(command_config) if command_config else ClientSecurity()

            def connect() -> WireClient:
                client = WireClient(bootstrap, timeout, security)
                client.connect()
                return client

            fn(connect=connect, as_json=as_json, **kwargs)

    return wrapper  # type: ignore[return-value]


@contextlib.contextmanager
def _one_line_errors(bootstrap: str, timeout: float) -> Iterator[None]:
    try:
        yield
    except ClientConfigError as exc:
        fail(str(exc))
    except WireError as exc:
        fail(str(exc), exc.kafka_error)
    except TimeoutError:
        fail(f"the broker at {bootstrap} did not answer within {timeout}s")


def pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for pair in values:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}", param_hint=option)
        out[key.strip()] = value.strip()
    return out


class Progress(Protocol):
    def update(self, n_steps: int) -> None: ...


class _NoBar:
    def update(self, n_steps: int) -> None:
        pass


def shows_progress(quiet: bool) -> bool:
    return not quiet and sys.stderr.isatty() and not os.environ.get("PYBROKER_NO_PROGRESS")


@contextlib.contextmanager
def progress(length: int, label: str, quiet: bool) -> Iterator[Progress]:
    """A progress bar on stderr for a person at a terminal; a bar that draws nothing when `quiet` (under
    --json, or when the work is small) or when stderr is not a terminal (or PYBROKER_NO_PROGRESS is set)."""
    if shows_progress(quiet):
        with click.progressbar(length=length, label=label, file=sys.stderr) as bar:
            yield bar
    else:
        yield _NoBar()
