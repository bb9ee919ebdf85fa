"""The manual in the site (/docs/, gym/docs.py): every page of docs/*.md renders in the
contents' order, every link in it answers 200 and every anchor exists, every code example
tagged as a suite, pair file or probing file is accepted by the real importers (through
the API, as a user would send it), the search finds sections and survives hostile input,
a new Markdown file joins the sidebar without code changes, and the pages that the docs
explain link to them. Writes artifacts/docs-*.png in the browser test."""

from __future__ import annotations

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from gym import docs
from suites.formats import predictions
from tests.conftest import token_client

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```$", re.S | re.M)
TEMPLATE_LINK = re.compile(r"\{% url 'docs:page' '(?P<slug>[^']+)' %\}(?:#(?P<anchor>[\w-]+))?")
# Paths in the repository that the docs name in `code`: they must exist.
REPO_PATH = re.compile(
    r"`((?:gym|suites|evaluations|templates|static|tests|scripts|benchmarks|examples|docs)"
    r"/[\w./-]*)`"
)


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        values = dict(attrs)
        if values.get("id"):
            self.ids.add(str(values["id"]))
        if tag == "a" and values.get("href"):
            self.hrefs.append(str(values["href"]))


def _parsed(html: str) -> _Links:
    links = _Links()
    links.feed(html)
    return links


def _article(html: str) -> str:
    """The page's own text, without the header and the sidebar."""
    return html[html.index('<div class="docs-body">') :]


def _hits(html: str) -> list[str]:
    """The search results' addresses, best first."""
    return re.findall(r'<li>\s*<a href="([^"]+)">', html[html.index('class="docs-hits"') :])


def _markdown_files() -> list[Path]:
    return sorted(DOCS.glob("*.md"))


def test_the_contents_list_every_file_in_order() -> None:
    pages = docs.contents()
    slugs = [p.slug for p in pages]
    assert slugs == [
        "using-the-site",
        "formats",
        "predictions",
        "evaluation",
        "ngram",
        "minimal-pairs",
        "probing",
        "training",
        "series",
        "command-line",
        "api",
        "configuration",
        "many-machines",
        "backup",
        "faults",
        "benchmarks",
        "developing",
    ]
    assert {f.stem for f in _markdown_files()} == set(slugs) - {"predictions"}
    assert all(p.summary for p in pages), [p.slug for p in pages if not p.summary]
    assert [p.url for p in pages if p.slug == "predictions"] == ["/docs/predictions/"]


@pytest.mark.django_db
def test_every_page_renders_with_the_sidebar(anon_client) -> None:
    index = anon_client.get("/docs/")
    assert index.status_code == 200
    body = index.content.decode()
    # The contents page lists every page, in the sidebar's order, with its summary.
    titles = [p.title for p in docs.contents()]
    positions = [body.index(f">{t}</a>", body.index("docs-index")) for t in titles]
    assert positions == sorted(positions)
    for page in docs.contents():
        response = anon_client.get(page.url)
        assert response.status_code == 200, page.url
        html = response.content.decode()
        assert f'<a href="{page.url}" aria-current="page">{page.title}</a>' in html
        assert f"<h1>{page.title}</h1>" in html
        assert html.count("<h1") == 1, page.url
        # Every page in the sidebar, and a Docs link in the header.
        assert all(f'href="{p.url}"' in html for p in docs.contents())
        assert '<a href="/docs/">Docs</a>' in html


@pytest.mark.django_db
def test_every_link_answers_200_and_every_anchor_exists(alice_client) -> None:
    pages = ["/docs/", *(p.url for p in docs.contents())]
    ids: dict[str, set[str]] = {}
    checked: set[str] = set()
    problems = []
    for url in pages:
        html = alice_client.get(url).content.decode()
        links = _parsed(_article(html))
        ids[url] = _parsed(html).ids
        for href in links.hrefs:
            parts = urlsplit(href)
            if parts.scheme:
                assert parts.scheme == "https", f"{url}: {href}"
                continue
            assert not href.endswith(".md"), f"{url}: {href} was not made a site link"
            target = unquote(parts.path) or url
            checked.add(f"{target}#{parts.fragment}")
            if target not in ids:
                response = alice_client.get(target)
                if response.status_code != 200:
                    problems.append(f"{url}: {href} -> {response.status_code}")
                    continue
                ids[target] = _parsed(response.content.decode()).ids
            if parts.fragment and parts.fragment not in ids[target]:
                problems.append(f"{url}: {href}: no id {parts.fragment!r} on {target}")
    assert problems == []
    # The crawl did reach other pages' anchors and pages outside the docs.
    assert "/docs/evaluation/#why-a-value-is-missing" in checked
    assert "/runs/#" in checked and "/api/docs/#" in checked
    assert len(checked) >= 40


def test_markdown_links_become_site_links() -> None:
    page = docs.render_page(
        "# T\n\nSee [a](probing.md#the-file-format), [b](formats.md), [c](/runs/) and [d](#x).\n",
        slug="t",
        order=1,
        summary="",
    )
    assert _parsed(page.html).hrefs == [
        "/docs/probing/#the-file-format",
        "/docs/formats/",
        "/runs/",
        "#x",
    ]


def test_paths_the_docs_name_exist() -> None:
    missing = []
    for file in [*_markdown_files(), REPO / "README.md"]:
        for path in REPO_PATH.findall(file.read_text()):
            if "<" not in path and "*" not in path and not (REPO / path).exists():
                missing.append(f"{file.name}: {path}")
    assert missing == []


def _examples() -> list[tuple[str, str, str, str]]:
    """(file, language, argument, body) of every code example the importers must take."""
    found = []
    for file in _markdown_files():
        for match in FENCE.finditer(file.read_text()):
            language, _, argument = match["info"].strip().partition(" ")
            if language in docs.EXAMPLE_KINDS:
                found.append((file.name, language, argument.strip(), match["body"]))
    return found


@pytest.mark.django_db
def test_every_example_file_is_accepted_by_the_importers(alice) -> None:
    client = token_client(alice)
    examples = _examples()
    assert sorted({language for _f, language, _a, _b in examples}) == sorted(docs.EXAMPLE_KINDS)
    for n, (file, language, argument, body) in enumerate(examples):
        where = f"{file}, example {n} ({language})"
        if language == "suite-json":
            response = client.post("/api/suites/", body, content_type="application/json")
            assert response.status_code == 201, (where, response.content)
            assert response.json()["name"] == json.loads(body)["meta"]["name"]
        elif language in ("pairs-tsv", "pairs-jsonl", "pairs-txt"):
            extension = language.removeprefix("pairs-")
            response = client.post(
                f"/api/minimal-pairs/?name=docs-example-{n}&filename=example.{extension}",
                body.encode(),
                content_type="application/octet-stream",
            )
            assert response.status_code == 201, (where, response.content)
            assert response.json()["pair_count"] == 2
            assert response.json()["import_warnings"] == []
        else:
            upload = SimpleUploadedFile(f"docs-example-{n}.txt", body.encode())
            response = client.post(
                "/api/probing-tasks/",
                {"file": upload, "name": f"docs-example-{n}", "task_type": argument or "custom"},
            )
            assert response.status_code == 201, (where, response.content)
            assert response.json()["task_type"] == (argument or "custom")


@pytest.mark.django_db
def test_the_prediction_page_states_the_parser_limits(anon_client) -> None:
    html = anon_client.get("/docs/predictions/").content.decode()
    assert f"at most {predictions.MAX_NUMBER_DIGITS} digits on each side" in html
    for number in ("2.", "1.5e1", "2E-3", "1_000", "0x1F"):
        predictions.parse(f"(1;%match%) > {number}")


@pytest.mark.django_db
def test_search_finds_sections_in_markdown_and_view_pages(anon_client) -> None:
    response = anon_client.get("/docs/search/?q=visibility+TIMEOUT")
    assert response.status_code == 200
    html = response.content.decode()
    assert _hits(html)[0] == "/docs/configuration/#runs"
    assert "<mark>visibility</mark> <mark>timeout</mark>" in html
    # The prediction language page is rendered by its own view, and searched all the same.
    chained = anon_client.get("/docs/search/?q=precedence+loosest").content.decode()
    assert _hits(chained) == ["/docs/predictions/#precedence"]
    nothing = anon_client.get("/docs/search/?q=zzzqqq").content.decode()
    assert "No section holds every word of “zzzqqq”" in nothing
    empty = anon_client.get("/docs/search/")
    assert empty.status_code == 200 and "Type a few words" in empty.content.decode()


@pytest.mark.django_db
def test_search_and_pages_answer_hostile_input(anon_client) -> None:
    long = anon_client.get("/docs/search/?q=" + "a" * 10_000)
    assert long.status_code == 400
    assert "The search is 10,000 characters long; search for at most 200" in long.content.decode()
    script = anon_client.get("/docs/search/?q=%3Cscript%3Ealert(1)%3C/script%3E+the")
    assert script.status_code == 200
    assert "<script>alert" not in script.content.decode()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in script.content.decode()
    for query in ("%FF%FE%ED%A0%80", "%E2%80%AE%F0%9F%98%80", "(((%5B%5B*+?", "%20" * 200):
        assert anon_client.get(f"/docs/search/?q={query}").status_code == 200, query
    many = anon_client.get("/docs/search/?q=" + "a+" * 60)
    assert many.status_code == 200
    assert "Only the first 10 words were searched for." in many.content.decode()
    assert anon_client.get("/docs/search/?q=%00").status_code == 400
    for slug in ("../../etc/passwd", "..%2F..%2Fetc%2Fpasswd", "nope", "x" * 5000, "search.md"):
        assert anon_client.get(f"/docs/{slug}/").status_code == 404, slug
    assert Client().post("/docs/search/", {"q": "x"}).status_code == 405


@pytest.mark.django_db
def test_a_new_markdown_file_joins_the_sidebar(anon_client, tmp_path, monkeypatch) -> None:
    for file in _markdown_files():
        shutil.copy(file, tmp_path / file.name)
    (tmp_path / "training.md").write_text(
        "---\norder: 45\nsummary: Train a model.\n---\n# Training\n\n## Corpora\n\nText.\n"
    )
    (tmp_path / "zz-notes.md").write_text("# Notes without front matter\n\nLast.\n")
    monkeypatch.setattr(docs, "DOCS_DIR", tmp_path)
    slugs = [p.slug for p in docs.contents()]
    assert slugs[slugs.index("evaluation") + 1] == "training"
    assert slugs[-1] == "zz-notes"
    page = anon_client.get("/docs/training/").content.decode()
    assert '<a href="#corpora">Corpora</a>' in page
    assert '<a href="/docs/zz-notes/">Notes without front matter</a>' in page


def test_bad_front_matter_is_refused_with_the_file_named(tmp_path, monkeypatch) -> None:
    (tmp_path / "broken.md").write_text("---\norder: first\n---\n# Broken\n")
    monkeypatch.setattr(docs, "DOCS_DIR", tmp_path)
    with pytest.raises(docs.FrontMatterError, match="broken.md: order 'first' is not a number"):
        docs.contents()


def test_every_docs_link_in_the_templates_reaches_a_page_and_anchor() -> None:
    pages = docs.markdown_pages()
    found = []
    for template in (REPO / "templates").rglob("*.html"):
        for match in TEMPLATE_LINK.finditer(template.read_text()):
            page = pages[match["slug"]]
            anchors = {anchor for section in page.sections for anchor in [section.anchor]}
            assert not match["anchor"] or match["anchor"] in anchors, (template, match[0])
            found.append(f"{template.relative_to(REPO / 'templates')}:{match['slug']}")
    # The pages the issue named link to the docs that explain them.
    for expected in (
        "suites/syntaxgym/suite_upload.html:formats",
        "evaluations/syntaxgym/result.html:evaluation",
        "suites/probing/probing_list.html:probing",
        "suites/probing/probing_detail.html:probing",
        "evaluations/probing/probing_run.html:probing",
        "suites/minimal_pairs/pair_set_list.html:minimal-pairs",
        "suites/minimal_pairs/pair_set_detail.html:minimal-pairs",
        "evaluations/minimal_pairs/pair_result.html:minimal-pairs",
    ):
        assert expected in found


@pytest.mark.django_db
def test_pages_link_to_their_docs(alice_client) -> None:
    links = {
        "/upload/": "/docs/formats/",
        "/probing/": "/docs/probing/",
        "/probing/upload/": "/docs/probing/#the-file-format",
        "/minimal-pairs/": "/docs/minimal-pairs/",
        "/minimal-pairs/upload/": "/docs/minimal-pairs/#data",
    }
    for page, target in links.items():
        response = alice_client.get(page)
        assert response.status_code == 200, page
        assert f'href="{target}"' in response.content.decode(), page


def test_the_readme_keeps_the_two_commands_and_points_to_the_docs() -> None:
    readme = (REPO / "README.md").read_text()
    assert "```\nbash scripts/run.sh\n```" in readme
    assert "```\nbash scripts/test.sh\n```" in readme
    assert len(readme.splitlines()) < 150
    linked = set(re.findall(r"\]\((docs/[\w-]+\.md)(?:#[\w-]+)?\)", readme))
    assert linked, "the README links to no page of the docs"
    assert all((REPO / path).exists() for path in linked), linked


@pytest.mark.browser
@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("width", [1280, 720])
def test_the_docs_in_a_browser(page, width: int) -> None:
    from playwright.sync_api import expect

    from tests.browser import artifact

    page.set_viewport_size({"width": width, "height": 900})
    for url, name in (
        ("/docs/", "index"),
        ("/docs/minimal-pairs/", "minimal-pairs"),
        ("/docs/ngram/", "ngram"),
        ("/docs/configuration/", "configuration"),
        ("/docs/search/?q=visibility+timeout", "search"),
    ):
        page.goto(url)
        # Nothing is wider than the window: long tables and code scroll in their own box.
        assert page.evaluate("document.documentElement.scrollWidth") <= width, (url, width)
        nav = page.locator("nav.docs-nav").bounding_box()
        body = page.locator("div.docs-body").bounding_box()
        assert nav is not None and body is not None
        if width >= 1000:
            assert nav["x"] + nav["width"] <= body["x"], "the contents sit beside the page"
        else:
            assert nav["y"] + nav["height"] <= body["y"], "the contents sit above the page"
        page.screenshot(
            path=artifact(f"docs-{name}-{width}.png"), full_page=name != "minimal-pairs"
        )
    # The search box works without JavaScript's help: a plain form.
    page.goto("/docs/")
    page.get_by_label("Search the documentation").fill("straddling tokens")
    page.get_by_role("button", name="Search").click()
    expect(page.locator("ol.docs-hits > li").first).to_contain_text("Evaluation and scoring")
