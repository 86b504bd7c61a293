"""Go for the ecosystem tests: where the module in `tests/ecosystem/go/` is, how to build it, and how to run
the franz-go module's own tests from the module cache.

`make go-modules` downloads what `go/go.mod` pins into Go's module cache (outside the tree) and sets
PYBROKER_GO_MODULES for the tests: then a missing Go or module is a failure, otherwise a skip with the reason.
Builds run with GOPROXY=off, so a test never reaches the network. Called from the pytest process only.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest

MODULE = Path(__file__).resolve().parent / "go"
ENV_REQUIRED = "PYBROKER_GO_MODULES"
FRANZ_GO = "github.com/twmb/franz-go"
BUILD_TIMEOUT_S = 900.0  # a cold build of kgo with its tests takes minutes on two loaded cores


def go_env() -> dict[str, str]:
    """The environment of every `go` command here: modules from the cache only, go.mod may be re-read."""
    env = dict(os.environ)
    env.update({"GOFLAGS": "-mod=mod", "GOPROXY": "off", "CGO_ENABLED": "0"})
    return env


def missing_or_skip(reason: str) -> None:
    if os.environ.get(ENV_REQUIRED):
        pytest.fail(reason)
    pytest.skip(reason)


def need_go() -> str:
    go = shutil.which("go")
    if go is None:
        missing_or_skip("Go is not installed: `make go-modules` installs it")
    assert go is not None
    return go


def pinned_version(module: str) -> str:
    """The version `go/go.mod` pins for `module`."""
    for line in (MODULE / "go.mod").read_text().splitlines():
        words = line.split()
        if words[:1] == [module]:
            return words[1]
        if words[:2] == ["require", module]:
            return words[2]
    raise AssertionError(f"{module} is not in go.mod")


def build(package: str, out: Path) -> Path:
    """`go build` one package of the module into `out`; a missing module says to run `make go-modules`."""
    go = need_go()
    done = subprocess.run([go, "build", "-o", str(out), f"./{package}"], cwd=MODULE, env=go_env(),
                          capture_output=True, text=True, timeout=BUILD_TIMEOUT_S)
    if done.returncode != 0:
        if "GOPROXY=off" in done.stderr or "module lookup disabled" in done.stderr:
            missing_or_skip(f"Go modules are not downloaded: run `make go-modules`\n{done.stderr[-2000:]}")
        raise AssertionError(f"go build ./{package} failed:\n{done.stderr[-4000:]}")
    return out


def module_copy(module: str, dest: Path) -> Path:
    """A writable copy of `module` at its pinned version, from the module cache (read-only there), so that
    `go test` can run in it."""
    go = need_go()
    version = pinned_version(module)
    done = subprocess.run([go, "mod", "download", "-json", f"{module}@{version}"], cwd=MODULE, env=go_env(),
                          capture_output=True, text=True, timeout=120)
    info = json.loads(done.stdout or "{}")
    if done.returncode != 0 or not info.get("Dir"):
        missing_or_skip(f"{module}@{version} is not in the module cache: run `make go-modules`\n"
                        f"{(done.stdout + done.stderr)[-2000:]}")
    shutil.copytree(info["Dir"], dest)
    for path in [dest, *dest.rglob("*")]:
        path.chmod(path.stat().st_mode | stat.S_IWUSR)
    return dest
