"""What an install gives a new user, read from pyproject.toml, setup.py and the Makefile: no setuptools
warnings (the license as an SPDX string, every folder of shipped files listed as a package), runtime
dependencies only what the installed code imports, no `build/` left in the checkout, and a line before and
after the quiet compile."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
#: a distribution's name -> the module its users import, where the two differ
IMPORT_NAMES = {"prometheus-client": "prometheus_client", "mypy-extensions": "mypy_extensions"}
CODE_DIRS = ("broker", "clients", "protocol", "storage", "config")


def _imported_top_level_modules() -> set[str]:
    found: set[str] = set()
    for folder in CODE_DIRS:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    found |= {alias.name.split(".")[0] for alias in node.names}
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    found.add(node.module.split(".")[0])
    return found


def test_the_license_is_an_spdx_string_and_setuptools_is_new_enough_for_it() -> None:
    assert isinstance(PYPROJECT["project"]["license"], str), "a TOML table is deprecated by setuptools"
    requires = " ".join(PYPROJECT["build-system"]["requires"])
    assert re.search(r"setuptools>=(7[7-9]|[89]\d)", requires), requires


def test_every_folder_of_shipped_files_is_a_listed_package() -> None:
    setuptools = PYPROJECT["tool"]["setuptools"]
    packages, dirs = set(setuptools["packages"]), setuptools["package-dir"]
    for package, patterns in setuptools["package-data"].items():
        assert package in packages, f"{package}: data of a package setuptools does not ship"
        assert all("/" not in pattern for pattern in patterns), (
            f"{package}: {patterns} reach into a subfolder, which setuptools warns is an unlisted package")
    for package in packages:
        top = ".".join(package.split(".")[:2])
        folder = ROOT / dirs[top] / Path(*package.split(".")[2:])
        assert folder.is_dir(), package


def test_runtime_dependencies_are_only_what_the_installed_code_imports() -> None:
    imported = _imported_top_level_modules()
    for requirement in PYPROJECT["project"]["dependencies"]:
        name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
        module = IMPORT_NAMES.get(name, name.replace("-", "_"))
        assert module in imported, f"{name} is installed for the broker, but nothing of broker/, clients/, ... imports it"


def test_setup_removes_the_build_dir_it_made() -> None:
    tree = ast.parse((ROOT / "setup.py").read_text())
    guarded = [node for node in tree.body if isinstance(node, ast.Try)
               and any(isinstance(n, ast.Call) and getattr(n.func, "id", "") == "setup" for n in ast.walk(node))]
    assert guarded, "setup() runs without a cleanup of build/"
    cleanup = ast.unparse(guarded[0].finalbody)
    assert "rmtree" in cleanup and "build" in cleanup, cleanup


def test_the_quiet_install_says_what_it_does_and_how_long_it_took() -> None:
    makefile = (ROOT / "Makefile").read_text()
    for target in ("$(BROKER_STAMP):", "$(STAMP):"):
        recipe = makefile.split(f"\n{target}", 1)[1].split("\n\n", 1)[0]
        install = next(line for line in recipe.splitlines() if "pip install -q -e" in line)
        assert "INSTALL_SAYS" in install and "INSTALLED_SAYS" in install, install
    assert re.search(r"INSTALLED_SAYS = .*date \+%s", makefile)


def test_the_editable_install_drops_setuptools_notice_and_only_it() -> None:
    """pip prints a build backend's warnings even when quiet: setup.py ignores setuptools' informational
    "Editable installation." notice by its category and message, so any other warning still shows."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    filters = [node for node in ast.walk(tree) if isinstance(node, ast.Call)
               and ast.unparse(node.func) == "warnings.filterwarnings"]
    assert len(filters) == 1, [ast.unparse(f) for f in filters]
    call = filters[0]
    keywords = {k.arg: k.value for k in call.keywords}
    assert ast.literal_eval(call.args[0]) == "ignore"
    assert ast.unparse(keywords["category"]) == "InformationOnly"
    message = ast.literal_eval(keywords["message"])
    assert re.match(message, "Editable installation.\n!!\n") and not re.match(message, "Installing")
