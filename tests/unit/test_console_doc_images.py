"""docs/console.md shows the console's screenshots from docs/images/console/ (written by `make screenshots`,
see tests/integration/test_console_admin_browser.py): every image it references exists and is a PNG of the
tour's fixed width, and every image in that folder is referenced, so none goes stale unseen."""

from __future__ import annotations

import re
import struct
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "console.md"
IMAGES = ROOT / "docs" / "images" / "console"
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)\s]+)\)")
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
WIDTH = 1280  # tests/integration/console_page.py's WINDOW


def _referenced() -> list[str]:
    return IMAGE.findall(DOC.read_text())


def test_every_image_the_console_page_shows_exists_and_is_a_screenshot() -> None:
    referenced = _referenced()
    assert referenced, "docs/console.md shows no screenshot"
    for link in referenced:
        path = (DOC.parent / link).resolve()
        assert path.is_file(), f"docs/console.md shows {link}, which does not exist (make screenshots)"
        head = path.read_bytes()[:24]
        assert head[:8] == PNG_SIGNATURE, f"{link} is not a PNG"
        width, _ = struct.unpack(">II", head[16:24])
        assert width == WIDTH, f"{link} is {width} px wide, not the tour's {WIDTH}"


def test_every_screenshot_in_the_folder_is_shown() -> None:
    shown = {(DOC.parent / link).resolve() for link in _referenced()}
    unused = sorted(p.name for p in IMAGES.glob("*.png") if p.resolve() not in shown)
    assert not unused, f"docs/images/console/ has images docs/console.md does not show: {unused}"
