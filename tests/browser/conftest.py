"""Browser tests of the studio page: Selenium driving headless Chromium against a real local
server (the banking example, offline model). They run when selected (`make browser-test`, that
is `pytest tests/browser -m browser`) and skip, saying what to install, when Chromium, its
driver or Selenium are missing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from engine.model import AgentSnapshot
from examples.banking import TOOLS_MODULE, bank
from infra.runtime import reset_runtime
from waypoint.local_server import LocalServer

BROWSER = "browser"
ROOT = Path(__file__).resolve().parents[2]
SCREENSHOTS = ROOT / "build" / "studio-screenshots"
CHROMIUM = os.environ.get("WAYPOINT_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("WAYPOINT_CHROMEDRIVER", shutil.which("chromedriver") or "")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{BROWSER}: drives the studio page in headless Chromium; `make browser-test`"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Browser tests run only when selected with `-m browser` (`make test` stays fast)."""
    if BROWSER in (config.getoption("-m") or ""):
        return
    skip = pytest.mark.skip(reason="drives a real browser: `make browser-test` (pytest -m browser)")
    for item in items:
        if BROWSER in item.keywords:
            item.add_marker(skip)


def missing_browser() -> str | None:
    """What is missing to drive Chromium, as an instruction; None when everything is there."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "Selenium is not installed: pip install -e '.[browser]'"
    if not Path(CHROMIUM).exists():
        return f"no Chromium at {CHROMIUM}: apt-get install -y chromium (or set WAYPOINT_CHROMIUM)"
    if not CHROMEDRIVER or not Path(CHROMEDRIVER).exists():
        return "no chromedriver: apt-get install -y chromium-driver (or set WAYPOINT_CHROMEDRIVER)"
    return None


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    """A headless Chromium (1280×900), closed after the module."""
    missing = missing_browser()
    if missing and os.environ.get("WAYPOINT_REQUIRE_BROWSER"):  # CI (`make browser-test`)
        pytest.fail(missing)
    if missing:
        pytest.skip(missing)
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                     "--disable-gpu", "--window-size=1280,900", "--no-first-run"):  # fmt: skip
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.set_page_load_timeout(120)
    try:
        yield driver
    finally:
        driver.quit()


def screenshot(driver: Any, name: str) -> Path:
    """Write a screenshot of the whole page as a test artefact (build/studio-screenshots/)."""
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.set_window_size(1280, min(max(900, int(height)), 4000))
    driver.execute_script("window.scrollTo(0, 0)")
    driver.save_screenshot(str(path))
    driver.set_window_size(1280, 900)
    return path


@contextmanager
def offline_bank_server(
    tmp_path_factory: pytest.TempPathFactory, agent: AgentSnapshot, **options: Any
) -> Iterator[LocalServer]:
    """A real local server for `agent` with the banking tools, on the offline model (no OpenAI
    settings, no CORS origins from the environment), a fresh bank, quiet logs."""
    monkeypatch = pytest.MonkeyPatch()
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "WAYPOINT_LLM_PROVIDER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("WAYPOINT_CORS_ORIGINS", raising=False)
    monkeypatch.setenv("WAYPOINT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    monkeypatch.setenv("POWERTOOLS_LOG_LEVEL", "CRITICAL")
    bank.reset_bank()
    try:
        with LocalServer(agent, tools_module=TOOLS_MODULE, **options) as server:
            yield server
    finally:
        reset_runtime()
        monkeypatch.undo()
