"""The browser side of the console's browser tests: a headless chromium (Debian's, through chromium-driver)
at a fixed window size, a `Page` with waits that fail with what the page shows, and where screenshots go.

Screenshots go under `test-artifacts/` (git-ignored) on every run; with `PYBROKER_CONSOLE_SCREENSHOTS=1`
(`make screenshots`) the screenshot tour writes the documentation's images, `docs/images/console/`, instead.
A normal run never rewrites a tracked file.
"""

from __future__ import annotations

import base64
import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.integration.brokers import REPO_ROOT

#: how long a wait lasts before it fails with what the page shows (generous: the machine may be loaded)
WAIT_S = 60.0
#: the window every screenshot is taken at, so the docs' images stay the same size from run to run
WINDOW = (1280, 900)
SCREENSHOTS_ENV = "PYBROKER_CONSOLE_SCREENSHOTS"
DOC_IMAGES = REPO_ROOT / "docs" / "images" / "console"


def screenshot_dir(artifacts: str) -> Path:
    """docs/images/console when asked for (make screenshots), else test-artifacts/<artifacts>."""
    target = DOC_IMAGES if os.environ.get(SCREENSHOTS_ENV) == "1" else REPO_ROOT / "test-artifacts" / artifacts
    target.mkdir(parents=True, exist_ok=True)
    return target


@contextmanager
def chromium() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    binary, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if binary is None or driver is None:
        message = "chromium and chromium-driver are missing (make test installs Debian's packages)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    options = Options()
    options.binary_location = binary
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={WINDOW[0]},{WINDOW[1]}", "--disable-extensions", "--hide-scrollbars"):
        options.add_argument(arg)
    session = webdriver.Chrome(options=options, service=Service(driver))
    try:
        yield session
    finally:
        session.quit()


class Page:
    """The browser at one console page, with waits that fail with what the page shows."""

    def __init__(self, driver: Any, base: str, shots: Path, *, signed_in: bool = False) -> None:
        self.driver = driver
        self.base = base
        self.shots = shots
        #: a page of a broker with authentication is loaded once it also names the signed-in user
        self.signed_in = signed_in

    def log_in(self, user: str | None, password: str = "") -> None:
        """Send Basic credentials with every request from now on (None: none), as a logged-in browser does."""
        headers = {} if user is None else {
            "Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}
        self.driver.execute_cdp_cmd("Network.enable", {})
        self.driver.execute_cdp_cmd("Network.setExtraHTTPHeaders", {"headers": headers})

    def open(self, route: str) -> None:
        self.driver.get("about:blank")  # a fresh document each time: a hash change alone keeps the old page
        self.driver.get(f"{self.base}/console/#/{route}")
        self.until(lambda: "Loading" not in self.text("page") and (not self.signed_in or self.text("who")),
                   f"page {route} never loaded")

    def el(self, id_: str) -> Any:
        return self.driver.find_element("id", id_)

    def text(self, id_: str) -> str:
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

        try:
            return str(self.el(id_).text)
        except (NoSuchElementException, StaleElementReferenceException):
            return ""

    def until(self, check: Callable[[], Any], what: str, timeout: float = WAIT_S) -> Any:
        from selenium.common.exceptions import TimeoutException
        from selenium.webdriver.support.ui import WebDriverWait

        try:
            return WebDriverWait(self.driver, timeout, poll_frequency=0.1).until(lambda _: check())
        except TimeoutException:
            raise AssertionError(f"{what}; the page shows:\n{self.text('page')}\n{self.text('notice')}") from None

    def rows(self, table_id: str) -> list[list[str]]:
        from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException

        try:  # one script for the whole table: a round trip per cell makes a 200-row table take seconds
            return list(self.driver.execute_script(
                "return Array.from(document.querySelectorAll(`#${arguments[0]} tbody tr`))"
                ".map(tr => Array.from(tr.querySelectorAll('td')).map(td => td.innerText.trim()))", table_id))
        except (NoSuchElementException, StaleElementReferenceException):
            return []

    def cells(self, table_id: str, index: int) -> list[str]:
        """One row's cells (index as in a list, -1 the last), or [] while the table is (re)drawn."""
        rows = self.rows(table_id)
        return rows[index] if -len(rows) <= index < len(rows) else []

    def row(self, table_id: str, first: str) -> list[str] | None:
        return next((r for r in self.rows(table_id) if r and r[0] == first), None)

    def click_in_row(self, table_id: str, first: str, button: str) -> None:
        for tr in self.driver.find_elements("css selector", f"#{table_id} tbody tr"):
            cells = tr.find_elements("css selector", "td")
            if cells and cells[0].text == first:
                next(b for b in tr.find_elements("css selector", "button") if b.text == button).click()
                return
        raise AssertionError(f"no row {first!r} in #{table_id}: {self.rows(table_id)}")

    def fill(self, id_: str, value: str) -> None:
        field = self.el(id_)
        field.clear()
        field.send_keys(value)

    def select(self, id_: str, value: str) -> None:
        from selenium.webdriver.support.ui import Select

        Select(self.el(id_)).select_by_value(value)

    def confirm(self, typed: str | None = None) -> None:
        self.until(lambda: self.el("confirm").is_displayed(), "no confirmation dialog")
        if typed is not None:
            self.fill("confirm-type", typed)
        self.el("confirm-ok").click()
        self.until(lambda: not self.el("confirm").is_displayed(), "the dialog did not close")

    def screenshot(self, name: str) -> Path:
        self.driver.set_window_size(*WINDOW)
        path = self.shots / f"{name}.png"
        self.driver.save_screenshot(str(path))
        return path
