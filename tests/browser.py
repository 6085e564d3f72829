"""Headless Chromium for the dashboard's tests: Debian's chromium and chromedriver, driven by
Selenium, nothing downloaded. Skips without them, unless HWNAS_REQUIRE_BROWSER=1 (as in
.ci/run), where a missing browser fails instead of hiding the tests."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path(os.environ.get("HWNAS_CHROMIUM", "/usr/bin/chromium"))
CHROMEDRIVER = Path(os.environ.get("HWNAS_CHROMEDRIVER", "/usr/bin/chromedriver"))
ARGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--window-size=1400,1800",
    # WebGL in software: the 3-D view and large clouds (scattergl) need it without a GPU.
    "--enable-unsafe-swiftshader",
)
ARTIFACTS = Path(
    os.environ.get("HWNAS_TEST_ARTIFACTS", Path(__file__).resolve().parents[1] / "test-artifacts")
)


def require_browser() -> None:
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if not missing:
        return
    message = f"no browser: {', '.join(missing)} missing (apt-get install chromium chromium-driver)"
    if os.environ.get("HWNAS_REQUIRE_BROWSER") == "1":
        pytest.fail(message)
    pytest.skip(message)


@contextmanager
def chromium() -> Iterator[Any]:
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ARGS:
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def wait_for(condition: Callable[[], Any], timeout: float = 60, what: str = "condition") -> Any:
    """Poll until `condition()` is truthy; its value. AssertionError naming `what` after
    `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def screenshot(driver: Any, name: str) -> Path:
    """Save the page as a test artifact (HWNAS_TEST_ARTIFACTS, default test-artifacts/)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path
