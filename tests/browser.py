"""Shared fixtures for browser tests: Playwright driving Debian's `chromium` package (never
a browser downloaded by Playwright), one context and page per test against pytest-django's
live server, logging in through the real login form, and the artifacts folder.

tests/conftest.py registers the fixtures for every module (import them nowhere else: a
second import would start a second Playwright in the same session); import `login` and
`artifact` where needed, and mark the tests `@pytest.mark.browser` and `@pytest.mark.django_db(transaction=True)`
(the live server runs in another thread, so the data must be committed).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote, urlsplit

import pytest
from django.db import connections

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, ConsoleMessage, Page, ViewportSize

# Playwright's sync API runs an event loop in the test thread, and Django refuses ORM calls
# from a thread with a running loop. The tests' own ORM calls are plain synchronous code
# between browser steps, so the guard protects nothing here.
os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"

REPO = Path(__file__).resolve().parents[1]
ARTIFACTS = REPO / "artifacts"
VIEWPORT: ViewportSize = {"width": 1400, "height": 900}
CHROMIUM_ARGS = [
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
TIMEOUT_MS = 10_000
# Every page reports each Content Security Policy violation to the console, where the
# browser context collects it: Chromium logs a line of its own for some violations, the
# page's event fires for every one.
CSP_LISTENER = """
document.addEventListener("securitypolicyviolation", (event) => {
  console.error(`Content Security Policy violation: ${event.effectiveDirective} blocked `
    + `${event.blockedURI || "(inline)"} at ${event.sourceFile || event.documentURI}:`
    + `${event.lineNumber}`);
});
"""


def _unavailable(reason: str) -> None:
    """CI must run the browser tests, so there a missing browser is a failure; on a
    laptop without chromium the tests are skipped with the reason."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (CI must run the browser tests)", pytrace=False)
    pytest.skip(reason)


def artifact(name: str) -> Path:
    """A path in the artifacts folder (ignored by git) for screenshots and downloads."""
    ARTIFACTS.mkdir(exist_ok=True)
    return ARTIFACTS / name


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    executable = shutil.which("chromium")
    if executable is None:
        _unavailable(
            "Debian's chromium is not installed: apt-get install chromium "
            "(scripts/test.sh installs it)"
        )
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _unavailable("the playwright Python package is not installed (requirements-dev.txt)")
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        yield launched
        launched.close()
        # While Playwright's loop runs in this thread, Django keeps the thread's database
        # connections apart from those of the time before (asgiref's Local is per context
        # where a loop runs): close them now, while they are still Django's to see, or they
        # outlive the session and its test database cannot be dropped.
        connections.close_all()


@pytest.fixture
def csp_violations() -> list[str]:
    """What the Content Security Policy blocked in the test's pages, as the console said
    it. Any left at the test's end fail it (`browser_context`); a test that provokes one on
    purpose checks it and empties the list."""
    return []


@pytest.fixture
def browser_context(
    browser: Browser, live_server: Any, csp_violations: list[str]
) -> Iterator[BrowserContext]:
    """A fresh profile (no cookies) per test; relative URLs go to the live server, and
    pages may use the clipboard, so that tests can paste as a user does. A test whose
    pages break the site's Content Security Policy fails, naming what was blocked."""
    context = browser.new_context(
        viewport=VIEWPORT, base_url=live_server.url, accept_downloads=True
    )
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=live_server.url)
    context.set_default_timeout(TIMEOUT_MS)
    context.add_init_script(CSP_LISTENER)

    def collect(message: ConsoleMessage) -> None:
        if "Content Security Policy" in message.text:
            csp_violations.append(f"{message.page and message.page.url}: {message.text}")

    context.on("console", collect)
    yield context
    from playwright.sync_api import Error as PlaywrightError  # there: `browser` found it

    # A round trip to each open page, so that the console lines it sent before are in.
    for open_page in context.pages:
        try:
            open_page.evaluate("() => true")
        except PlaywrightError:
            pass  # closed, or navigating: its console lines are in already
    context.close()
    if csp_violations:
        pytest.fail(
            "The Content Security Policy blocked something:\n" + "\n".join(csp_violations),
            pytrace=False,
        )


@pytest.fixture
def page(browser_context: BrowserContext) -> Iterator[Page]:
    """A page whose uncaught JavaScript errors fail the test."""
    current = browser_context.new_page()
    errors: list[str] = []
    current.on("pageerror", lambda exc: errors.append(str(exc)))
    yield current
    if errors:
        pytest.fail("JavaScript errors on the page:\n" + "\n".join(errors), pytrace=False)


def login(page: Page, username: str, password: str, *, next_url: str = "/") -> None:
    """Log in through the site's own form, then land on `next_url`."""
    page.goto(f"/accounts/login/?next={quote(next_url)}")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Log in").click()
    target = unquote(urlsplit(next_url).path)
    page.wait_for_url(lambda url: unquote(urlsplit(url).path) == target)


def overflow(page: Page) -> int:
    """How many pixels the page is wider than its window (0 when it fits)."""
    return page.evaluate(
        "() => document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )


def type_cells(on: Page, *steps: str) -> None:
    """Type into the active cell, then press the key that follows each value."""
    for step in steps:
        if step in ("Tab", "Enter", "ArrowLeft", "ArrowRight", "ArrowUp", "ArrowDown"):
            on.keyboard.press(step)
        else:
            on.keyboard.type(step)
