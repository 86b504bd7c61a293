"""Docs are code: every code block of README.md and docs/*.md is run or checked (see `tests/doc_blocks.py`).

Each document runs in its own scratch dir (holding links to the repository's top-level entries, so
`.venv/bin/pybroker` and `examples/...` resolve as they do in a clone), with `.venv/bin` first on PATH so
`pybroker` is the installed program. Its blocks run in order, as a reader would type them, against a broker
of the test's own: every well-known port in the text (9092, 9093, 9404, the schema registry's 8081, ...) is replaced by a free one, the
same for the whole document. Inside shell blocks `make TARGET` is a dry run (`make -n`: the target exists
and its recipe expands; running `make test` from a test would recurse), and `docker`, `pip` and
`apt-get` only say they were skipped (the compose file has its own tests; installing is the Makefile's job).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import click
import pytest

from pybroker.broker.cli import cli
from pybroker.config.definitions import BROKER, TOPIC
from tests.doc_blocks import ROOT, Block, all_blocks, blocks_of, documents
from tests.integration.brokers import BrokerProcess, api_versions_ok, free_port

WELL_KNOWN_PORT = re.compile(r"(?<=[:/@ =])(909[0-9]|940[0-9]|8081)\b")
BLOCK_TIMEOUT_S = 180.0
BACKGROUND_READY_S = 60.0
SHELL_PRELUDE = """\
set -eo pipefail
make() { command make -s -n "$@" >/dev/null; echo "(make $*: dry run by the doc test)"; }
docker() { echo "(docker $*: not run by the doc test)"; }
pip() { echo "(pip $*: not run by the doc test)"; }
apt-get() { echo "(apt-get $*: not run by the doc test)"; }
sudo() { "$@"; }
"""


def _documents_with_blocks() -> list[Path]:
    return [path for path in documents() if any(block.checked or block.directive == "synopsis"
                                                  for block in blocks_of(path))]


def test_every_directive_is_known_and_every_skip_says_why() -> None:
    blocks = all_blocks()  # raises DocError on an unknown directive or a reason-less skip
    assert blocks, "no code blocks found"
    unlabelled = [block.where for block in blocks if not block.language]
    assert not unlabelled, f"code fences without a language (sh, python, properties, text, ...): {unlabelled}"
    assert any(block.path.name == "README.md" for block in blocks)


class DocRun:
    """One document's run: its scratch dir, its port map, its broker, its background programs."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.ports: dict[str, int] = {}
        self.broker: BrokerProcess | None = None
        self.broker_overrides: dict[str, str] | None = None
        self.background: list[subprocess.Popen[bytes]] = []
        self.outputs: list[str] = []
        for entry in ROOT.iterdir():
            if entry.name not in (".git", "data") and not (workdir / entry.name).exists():
                (workdir / entry.name).symlink_to(entry)

    # -- text -------------------------------------------------------------------------------------------
    def localize(self, text: str) -> str:
        """The block's text with each well-known port replaced by this run's free one."""
        def port(match: re.Match[str]) -> str:
            known = match.group(1)
            if known not in self.ports:
                self.ports[known] = free_port()
            return str(self.ports[known])
        return WELL_KNOWN_PORT.sub(port, text)

    def port_of(self, known: int) -> int:
        self.localize(f":{known}")
        return self.ports[str(known)]

    def env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env["PYBROKER_BOOTSTRAP_SERVER"] = f"127.0.0.1:{self.port_of(9092)}"
        env["PYSPARK_PYTHON"] = sys.executable
        env.pop("PYTHONPATH", None)
        return env

    # -- the broker the blocks talk to ------------------------------------------------------------------
    def ensure_broker(self, overrides: dict[str, str] | None = None) -> None:
        """A broker on the document's 9092: the one running (the document's own, started by a background
        block, or ours), unless `overrides` asks for one configured otherwise."""
        running = any(proc.poll() is None for proc in self.background) or (
            self.broker is not None and self.broker.is_running())
        if overrides is None and running:
            return
        wanted = overrides or {}
        if self.broker is not None and self.broker.is_running() and self.broker_overrides == wanted:
            return
        self.stop_background()
        self.stop_broker()
        run = len(list(self.workdir.glob("broker-*")))
        self.broker = BrokerProcess(self.workdir / f"broker-{run}", {"auto.create.topics.enable": "true", **wanted},
                                    port=self.port_of(9092))
        self.broker.start()
        self.broker_overrides = wanted

    def stop_broker(self) -> None:
        if self.broker is not None:
            self.broker.stop(expect_code=None)
            self.broker.close()
            self.broker = None

    def close(self) -> None:
        self.stop_broker()
        self.stop_background()

    def stop_background(self) -> None:
        for proc in self.background:
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
                try:
                    proc.wait(30)
                except subprocess.TimeoutExpired:
                    os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait(10)
        self.background = []

    # -- blocks -----------------------------------------------------------------------------------------
    def run_document(self, document: Path) -> None:
        blocks = blocks_of(document)
        named = {block.option("name"): block for block in blocks if block.option("name")}
        done: set[str] = set()
        for block in blocks:
            uses = block.option("uses")
            if uses is not None:
                if uses not in named:
                    raise AssertionError(f"{block.where}: @uses={uses} names no block of {document.name}")
                if uses not in done:
                    done.add(uses)
                    self.run(named[uses])
            name = block.option("name")
            if name is not None:
                if name in done:
                    continue
                done.add(name)
            if block.checked or block.directive == "synopsis":
                self.run(block)
            elif block.directive == "skip":
                print(f"{block.where}: skipped ({block.argument})")

    def run(self, block: Block) -> None:
        if block.directive == "synopsis":
            check_synopsis(block)
        elif block.language == "properties":
            check_properties(block)
        elif block.directive == "background":
            self.start_background(block)
        elif block.directive == "spark":
            if shutil.which("java") is None:
                self.outputs.append(f"{block.where}: not run (no Java here for Spark)")
                return
            self.ensure_broker()
            self.execute(block, timeout=600.0)
        else:
            self.ensure_broker(_overrides(self.localize(block.argument)) if block.directive == "broker" else None)
            self.execute(block)

    def _script(self, block: Block) -> tuple[list[str], Path]:
        text = self.localize(block.text)
        stem = f"block-{block.line}"
        if block.language == "python":
            path = self.workdir / f"{stem}.py"
            path.write_text(text)
            return [sys.executable, str(path)], path
        path = self.workdir / f"{stem}.sh"
        path.write_text(SHELL_PRELUDE + text)
        return ["bash", str(path)], path

    def execute(self, block: Block, timeout: float = BLOCK_TIMEOUT_S) -> None:
        command, _ = self._script(block)
        lines = block.option("input")
        stdin = "".join(f"{line}\n" for line in lines.split(",")).encode() if lines is not None else b""
        try:
            done = subprocess.run(command, cwd=self.workdir, env=self.env(), capture_output=True, timeout=timeout,
                                  input=stdin, check=False)
        except subprocess.TimeoutExpired as exc:
            raise AssertionError(f"{block.where}: still running after {timeout:.0f}s\n{block.text}") from exc
        output = (done.stdout + done.stderr).decode(errors="replace")
        self.outputs.append(f"{block.where}:\n{output}")
        if done.returncode != 0:
            broker = self.broker.log_tail() if self.broker is not None else ""
            raise AssertionError(f"{block.where} failed with exit status {done.returncode}\n--- block ---\n"
                                 f"{block.text}--- output ---\n{output}\n{broker}")

    def start_background(self, block: Block) -> None:
        self.stop_background()  # a document's next broker takes the same ports
        self.stop_broker()
        command, _ = self._script(block)
        with (self.workdir / f"background-{block.line}.out").open("wb") as log:
            proc = subprocess.Popen(command, cwd=self.workdir, env=self.env(), stdout=log,
                                    stderr=subprocess.STDOUT, start_new_session=True)
        self.background.append(proc)
        # the broker it starts answers on its first PLAINTEXT listener's port (9092 unless the block says)
        plaintext = re.search(r"PLAINTEXT://[\w.]+:(\d+)", block.text)
        port = self.port_of(int(plaintext.group(1)) if plaintext else 9092)
        deadline = time.monotonic() + BACKGROUND_READY_S
        while not api_versions_ok("127.0.0.1", port, timeout=1.0):
            if proc.poll() is not None or time.monotonic() > deadline:
                output = (self.workdir / f"background-{block.line}.out").read_text(errors="replace")
                raise AssertionError(f"{block.where}: the program it starts never answered on port {port}\n"
                                     f"{output[-4000:]}")
            time.sleep(0.2)


def _overrides(argument: str) -> dict[str, str]:
    pairs = [item.split("=", 1) for item in argument.split()]
    return {key: value for key, value in pairs}


# -- checks that do not run anything ---------------------------------------------------------------------
def known_config_key(key: str) -> bool:
    """A broker or topic key, or a listener-prefixed one (`listener.name.<l>.[<mechanism>.]<key>`)."""
    if key in BROKER or key in TOPIC:
        return True
    match = re.fullmatch(r"listener\.name\.[\w-]+\.(?:[\w-]+\.)?(.+)", key)
    return match is not None and (match.group(1) in BROKER or key.split(".", 3)[3] in BROKER)


def check_properties(block: Block) -> None:
    logical: list[tuple[int, str]] = []  # a line ending in a backslash goes on, as in a .properties file
    continued = False
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        if not continued:
            logical.append((number, line))
        continued = line.rstrip().endswith("\\")
    for number, line in logical:
        stripped = line.strip()
        if not stripped or stripped.startswith(("#", "!")):
            continue
        key = re.split(r"\s*[=:]\s*|\s+", stripped, maxsplit=1)[0]
        assert known_config_key(key), f"{block.path.name}:{number}: {key!r} is not a config key pybroker knows"


def check_synopsis(block: Block) -> None:
    """Each `pybroker ...` line names commands that exist and options those commands take."""
    for number, line in enumerate(block.text.splitlines(), start=block.line + 1):
        line = line.split("#", 1)[0]
        if "pybroker" not in line:
            continue
        words = re.sub(r"[\[\]]", " ", line.split("pybroker", 1)[1]).split()
        command: click.Command = cli
        commands = [command]
        for word in words:
            if word.startswith("-") or not isinstance(command, click.Group):
                break
            names = word.split("|")
            context = click.Context(command)
            found = [command.get_command(context, name) for name in names]
            if not all(found):
                if command is cli:
                    raise AssertionError(f"{block.path.name}:{number}: no command `pybroker {word}`")
                break  # an argument such as GROUP or DIR
            if len(names) > 1:
                break  # `list|describe|...`: the options may belong to any subcommand of this group
            command = found[0] if found[0] is not None else command
            commands = [command]
        options = {opt for c in commands for p in c.params for opt in (*p.opts, *p.secondary_opts)}
        for word in words:
            for option in re.findall(r"(?<![\w-])(--?[A-Za-z][\w-]*)", word):
                if option in ("-h", "--help"):
                    continue
                subcommand_options = {opt for c in commands if isinstance(c, click.Group)
                                      for sub in c.commands.values() for p in sub.params
                                      for opt in (*p.opts, *p.secondary_opts)}
                assert option in options | subcommand_options, (
                    f"{block.path.name}:{number}: `{option}` is not an option of "
                    f"`pybroker {' '.join(c.name or '' for c in commands)}`")


# -- the tests -------------------------------------------------------------------------------------------
@pytest.fixture
def doc_run(tmp_path: Path) -> Iterator[DocRun]:
    run = DocRun(tmp_path)
    try:
        yield run
    finally:
        run.close()


@pytest.mark.slow
# a document runs many blocks, each under its own timeout: README.md's took over 300 s on a loaded machine
@pytest.mark.hang_limit(1800)
@pytest.mark.parametrize("document", _documents_with_blocks(), ids=lambda path: path.name)
def test_document_blocks_run(document: Path, doc_run: DocRun, broker_target: str) -> None:
    if broker_target != "pybroker":
        pytest.skip("pybroker's own docs")
    doc_run.run_document(document)
