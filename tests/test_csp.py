"""The Content Security Policy as the server sends it: the exact policy on every kind of
answer (pages, the API, errors), the API docs' one addition, an operator's extra source,
and the report endpoint that browsers send violations to (logged, bounded, anonymous,
never a 500). tests/test_csp_browser.py checks it in a real browser."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from django.template.loader import render_to_string
from django.urls import reverse

from tests.conftest import manage

pytestmark = pytest.mark.django_db

HEADER = "Content-Security-Policy"
# The policy, directive by directive (django-csp writes them in no fixed order).
POLICY = {
    "default-src": ["'self'"],
    "script-src": ["'self'"],
    "style-src": ["'self'"],
    "img-src": ["'self'"],
    "connect-src": ["'self'"],
    "font-src": ["'self'"],
    "object-src": ["'none'"],
    "base-uri": ["'self'"],
    "form-action": ["'self'"],
    "frame-ancestors": ["'none'"],
    "report-uri": ["/csp-report/"],
}
REPORT = {
    "csp-report": {
        "document-uri": "http://testserver/leaderboard/",
        "violated-directive": "script-src-elem",
        "effective-directive": "script-src-elem",
        "blocked-uri": "inline",
        "source-file": "http://testserver/leaderboard/",
        "line-number": 12,
        "disposition": "enforce",
    }
}


def directives(header: str) -> dict[str, list[str]]:
    """A policy header as {directive: its sources}."""
    parts = [part.split() for part in header.split(";") if part.strip()]
    return {words[0]: words[1:] for words in parts}


@pytest.mark.parametrize(
    "path", ["/", "/leaderboard/", "/docs/ngram/", "/api/suites/", "/no/such/page/"]
)
def test_every_answer_carries_the_policy(anon_client, path: str) -> None:
    response = anon_client.get(path)
    assert directives(response[HEADER]) == POLICY
    assert reverse("csp-report") == POLICY["report-uri"][0]


def test_refusals_before_the_views_carry_it_too(anon_client, settings) -> None:
    # The upload limit answers from a middleware, before any view.
    settings.GYM_MAX_UPLOAD_BYTES = 10
    response = anon_client.post("/upload/", "x" * 100_000, content_type="text/plain")
    assert response.status_code == 413
    assert directives(response[HEADER]) == POLICY
    # Its page links back to the form, not to a javascript: address the policy refuses.
    assert 'href="/upload/"' in response.content.decode()
    assert "javascript:" not in response.content.decode()


def test_the_api_docs_run_under_it(anon_client) -> None:
    page = anon_client.get("/api/docs/")
    # Swagger UI's stylesheet draws its icons as data: images; on this page only.
    assert directives(page[HEADER]) == POLICY | {"img-src": ["'self'", "data:"]}
    html = page.content.decode()
    assert "<style" not in html
    scripts = html.split("<script")[1:]
    assert len(scripts) == 3 and all(" src=" in s.split(">")[0] for s in scripts)
    start = anon_client.get("/api/docs/?script=")
    assert start.status_code == 200 and start["Content-Type"].startswith("application/javascript")
    assert "SwaggerUIBundle" in start.content.decode()


def test_the_bare_error_pages_use_a_stylesheet(anon_client) -> None:
    # 500 and 503 are rendered without the site's templates; their styles are a file.
    for name in ("500.html", "503.html"):
        html = render_to_string(name, {"message": "The database is away."})
        assert "<style" not in html and "style=" not in html
        assert '<link rel="stylesheet" href="/static/css/bare.css">' in html
    assert anon_client.get("/static/css/bare.css").status_code == 200


def test_tables_of_the_docs_are_aligned_by_class(anon_client) -> None:
    html = anon_client.get("/docs/ngram/").content.decode()
    assert '<td class="align-right">' in html and "style=" not in html


def test_an_operator_adds_a_source(tmp_path: Path) -> None:
    environ = {
        "PATH": "/usr/bin:/bin",
        "GYM_VAR_DIR": str(tmp_path / "var"),
        "DJANGO_SETTINGS_MODULE": "gym.settings",
        "GYM_CSP_EXTRA_SOURCES": "https://static.example.org, https://fonts.example.org",
    }
    code = "from csp.utils import build_policy; print(build_policy())"
    done = manage(environ, "shell", "-c", code, timeout=120)
    assert done.returncode == 0, done.stderr
    extra = ["https://static.example.org", "https://fonts.example.org"]
    fetches = ("default-src", "script-src", "style-src", "img-src", "connect-src", "font-src")
    expected = POLICY | {name: ["'self'", *extra] for name in fetches}
    assert directives(done.stdout.strip().splitlines()[-1]) == expected


def _report(client, body: str | bytes, content_type: str = "application/csp-report"):
    return client.post("/csp-report/", body, content_type=content_type)


def test_a_report_is_logged(anon_client, caplog) -> None:
    # Anonymous and without a CSRF token, as browsers send it.
    with caplog.at_level(logging.WARNING, logger="gym.csp_reports"):
        response = _report(anon_client, json.dumps(REPORT))
    assert response.status_code == 204 and response.content == b""
    [record] = [r for r in caplog.records if r.name == "gym.csp_reports"]
    assert record.levelno == logging.WARNING
    assert record.getMessage() == (
        "Content Security Policy violation: 'script-src-elem' blocked 'inline' on "
        "'http://testserver/leaderboard/' ('http://testserver/leaderboard/' line '12')"
    )


def test_a_reporting_api_report_is_logged(anon_client, caplog) -> None:
    body = [
        {
            "type": "csp-violation",
            "url": "http://testserver/",
            "body": {
                "documentURL": "http://testserver/",
                "effectiveDirective": "style-src-attr",
                "blockedURL": "inline",
                "lineNumber": 3,
            },
        },
        {"type": "deprecation", "body": {"message": "not ours"}},
    ]
    with caplog.at_level(logging.WARNING, logger="gym.csp_reports"):
        response = _report(anon_client, json.dumps(body), "application/reports+json")
    assert response.status_code == 204
    [record] = [r for r in caplog.records if r.name == "gym.csp_reports"]
    assert "'style-src-attr' blocked 'inline' on 'http://testserver/'" in record.getMessage()


def test_a_hostile_report_is_logged_short_and_quoted(anon_client, caplog) -> None:
    hostile = {"csp-report": {"blocked-uri": "x\nFAKE LOG LINE" + "y" * 10_000}}
    many = [{"type": "csp-violation", "body": {"blockedURL": str(n)}} for n in range(50)]
    with caplog.at_level(logging.WARNING, logger="gym.csp_reports"):
        assert _report(anon_client, json.dumps(hostile)).status_code == 204
        assert _report(anon_client, json.dumps(many)).status_code == 204
    records = [r for r in caplog.records if r.name == "gym.csp_reports"]
    message = records[0].getMessage()
    assert "\n" not in message and "x\\nFAKE LOG LINE" in message
    assert len(message) < 500
    # One report logs at most 20 violations.
    assert len(records) == 1 + 20


@pytest.mark.parametrize(
    ("body", "wording"),
    [
        ("{not json", "The report is not JSON"),
        (b"\xff\xfe\xfa", "The report is not JSON"),
        ("[" * 5_000 + "]" * 5_000, "The report is not JSON"),
        ("[1, 2]", "neither shape"),
        ('{"csp-report": "x"}', "neither shape"),
        ('[{"type": "csp-violation", "body": 1}]', "neither shape"),
        ("17", "neither shape"),
        ("", "The report is not JSON"),
    ],
)
def test_a_report_that_is_no_report_gets_400(anon_client, body, wording: str) -> None:
    response = _report(anon_client, body)
    assert response.status_code == 400
    [error] = response.json()["errors"]
    assert error["code"] == "invalid" and wording in error["message"]


def test_a_long_report_gets_413_unread(anon_client, settings) -> None:
    settings.GYM_CSP_REPORT_MAX_BYTES = 1000
    padded = {"csp-report": {**REPORT["csp-report"], "original-policy": "p" * 1000}}
    response = _report(anon_client, json.dumps(padded))
    assert response.status_code == 413
    assert "GYM_CSP_REPORT_MAX_BYTES" in response.json()["errors"][0]["message"]
    assert _report(anon_client, json.dumps(REPORT)).status_code == 204


def test_reports_are_posted(anon_client) -> None:
    assert anon_client.get("/csp-report/").status_code == 405
