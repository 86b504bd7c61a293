"""docs/conformance.md is the page `python -m tests.conformance.report` renders from the scenarios now."""

from __future__ import annotations

from tests.conformance.report import DOC_PATH, render_markdown
from tests.doc_blocks import ROOT


def test_the_conformance_page_is_current() -> None:
    committed = (ROOT / DOC_PATH).read_text()
    assert committed == render_markdown(), "docs/conformance.md is out of date: run make docs"
