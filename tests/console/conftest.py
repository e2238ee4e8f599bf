"""moldau console tests: the console served against a real broker process (moldau, or tansu with
MOLDAU_TEST_BROKER=tansu), driven by a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``
through selenium).

Reuses the harness's broker fixtures (tests/harness/fixtures.py). The console itself runs in a
thread of the test process (its own event loop), as ``moldau console`` would run it; tests/console/test_cli.py
starts the real command as a subprocess.

``MOLDAU_CONSOLE_SCREENSHOTS=DIR`` makes the browser tests save a screenshot of each page they visit
(docs/console.md shows them).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.consoleutil import ConsoleThread
from harness.fixtures import (  # the fixtures of this directory
    _session_broker_health,
    broker,
    broker_factory,
    kind,
    make_topic,
    topic,
)

CHROMIUM = os.environ.get("MOLDAU_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("MOLDAU_CHROMEDRIVER", "/usr/bin/chromedriver")


@pytest.fixture(scope="module")
def console(broker: Any) -> Iterator[ConsoleThread]:
    c = ConsoleThread(broker.bootstrap).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="module")
def ro_console(broker: Any) -> Iterator[ConsoleThread]:
    c = ConsoleThread(broker.bootstrap, read_only=True).start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            f"{CHROMIUM} / {CHROMEDRIVER} missing: run ./scripts/setup.sh --test (installs Debian's "
            "chromium and chromium-driver)"
        )
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    profile = tempfile.mkdtemp(prefix="moldau-console-chromium-")
    opts = webdriver.ChromeOptions()
    opts.binary_location = CHROMIUM
    for a in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        f"--user-data-dir={profile}",
        "--window-size=1400,1000",
    ):
        opts.add_argument(a)
    driver = webdriver.Chrome(options=opts, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(60)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture
def shot(browser: Any, request: pytest.FixtureRequest) -> Any:
    """shot(name): save a screenshot of the current page when MOLDAU_CONSOLE_SCREENSHOTS is set."""
    where = os.environ.get("MOLDAU_CONSOLE_SCREENSHOTS")

    def take(name: str) -> None:
        if where:
            Path(where).mkdir(parents=True, exist_ok=True)
            browser.save_screenshot(str(Path(where) / f"{name}.png"))

    return take


@pytest.fixture
def group_id(request: pytest.FixtureRequest) -> str:
    return f"g-{request.node.name[:30]}-{uuid.uuid4().hex[:8]}"
