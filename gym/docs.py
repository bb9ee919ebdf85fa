"""The manual, in the site: `docs/*.md` rendered at /docs/<slug>/ with a contents sidebar
and a server-side search.

Each Markdown file is one page; its slug is the file name without `.md` and its title its
first `# ` heading. A file may start with front matter between two `---` lines:

    ---
    order: 40
    summary: One sentence for the contents page.
    ---

`order` (a whole number, default 1000) places the page in the sidebar, smaller first,
ties by title; so a new file shows up without any code change. Pages that a view renders
because part of their content is computed (the prediction language's common mistakes
come from the parser itself) are listed in VIEW_PAGES and join the sidebar and the
search the same way.

Only our own files go through Markdown, with raw HTML off (it is escaped); user text is
never rendered with it. Links to another page's file (`probing.md#pooling`) become site
links (`/docs/probing/#pooling`), so the files read the same on GitHub and in the site.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from html import escape
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import path, resolve, reverse
from django.utils.functional import SimpleLazyObject
from django.utils.text import slugify
from django.views.decorators.http import require_GET
from markdown_it import MarkdownIt
from markdown_it.token import Token

DOCS_DIR = Path(settings.BASE_DIR) / "docs"
DEFAULT_ORDER = 1000
# Pages rendered by a view of their own: slug -> (URL name, title, order, summary).
VIEW_PAGES: dict[str, tuple[str, str, int, str]] = {
    "predictions": (
        "suites:prediction_docs",
        "The prediction language",
        30,
        "Formulas over region values: references, comparisons, logic, arithmetic, "
        "worked examples and the parser's answers to common mistakes.",
    ),
}
# The docs' own URLs, which no page may take as its slug.
RESERVED_SLUGS = frozenset({"search"})
MAX_QUERY_CHARS = 200
MAX_QUERY_WORDS = 10
MAX_HITS = 40
SNIPPET_CHARS = 220
# Code blocks whose language names one of these are examples the importers must accept
# (tests/test_docs.py sends each through them); the caption says what they are.
EXAMPLE_KINDS = {
    "suite-json": "A suite (SyntaxGym JSON)",
    "pairs-tsv": "A minimal-pair set (tab-separated)",
    "pairs-jsonl": "A minimal-pair set (JSON Lines)",
    "pairs-txt": "A minimal-pair set (one sentence a line)",
    "probing": "A probing task (SentEval lines)",
}
_MD_LINK = re.compile(r"^(?P<slug>[A-Za-z0-9_-]+)\.md(?P<anchor>#[^\s]*)?$")


@dataclass
class Section:
    """A stretch of a page under one heading: what the search looks through."""

    heading: str
    anchor: str
    text: str


@dataclass
class Page:
    slug: str
    title: str
    order: int
    summary: str
    url: str
    html: str = ""
    headings: list[tuple[str, str]] = field(default_factory=list)  # (anchor, text) of h2
    sections: list[Section] = field(default_factory=list)


class FrontMatterError(ValueError):
    pass


def _front_matter(text: str, name: str) -> tuple[dict[str, str], str]:
    if not text.startswith("---\n"):
        return {}, text
    end = text.find("\n---\n", 3)
    if end < 0:
        raise FrontMatterError(f"{name}: front matter opened with --- is never closed")
    values = {}
    for line in text[4:end].splitlines():
        if not line.strip():
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise FrontMatterError(f"{name}: front matter line {line!r} is not 'key: value'")
        values[key.strip()] = value.strip()
    return values, text[end + 5 :]


def _plain(inline: Token) -> str:
    parts = []
    for child in inline.children or []:
        if child.type in ("text", "code_inline"):
            parts.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            parts.append(" ")
    return "".join(parts)


def _markdown() -> MarkdownIt:
    md = MarkdownIt("commonmark", {"html": False, "linkify": False}).enable("table")

    def fence(renderer: Any, tokens: list[Token], idx: int, options: Any, env: Any) -> str:
        token = tokens[idx]
        language = token.info.strip().split(" ")[0]
        code = renderer.rules["code_block"](tokens, idx, options, env)
        css_class = f"language-{escape(language)}"
        block = code.replace("<pre><code>", f'<pre><code class="{css_class}">', 1)
        if language in EXAMPLE_KINDS:
            caption = EXAMPLE_KINDS[language]
            return (
                f'<figure class="doc-example"><figcaption>{caption}</figcaption>{block}</figure>\n'
            )
        return block if language else code

    md.add_render_rule("fence", fence)
    return md


_MD = _markdown()


def _site_href(href: str) -> str:
    """`page.md#anchor` -> /docs/page/#anchor; everything else as written."""
    match = _MD_LINK.match(href)
    if not match:
        return href
    return f"/docs/{match['slug']}/{match['anchor'] or ''}"


def _align_by_class(cell: Token) -> None:
    """A table column's alignment (`| ---: |`) as a class: markdown-it writes it as a
    style attribute, which the Content Security Policy refuses (gym.css: .align-*)."""
    style = str(cell.attrGet("style") or "")
    if style.startswith("text-align:"):
        del cell.attrs["style"]
        cell.attrSet("class", f"align-{style.removeprefix('text-align:')}")


def render_page(text: str, *, slug: str, order: int, summary: str) -> Page:
    tokens = _MD.parse(text)
    title = ""
    drop: list[int] = []  # the title's tokens: the template shows the title
    used: set[str] = set()
    headings: list[tuple[str, str]] = []
    sections = [Section(heading="", anchor="", text="")]
    texts: list[list[str]] = [[]]
    for i, token in enumerate(tokens):
        if token.type == "heading_open":
            words = _plain(tokens[i + 1])
            if token.tag == "h1" and not title:
                title = words
                drop = [i, i + 1, i + 2]
                continue
            base = slugify(words) or "section"
            anchor, n = base, 1
            while anchor in used:
                n += 1
                anchor = f"{base}-{n}"
            used.add(anchor)
            token.attrSet("id", anchor)
            if token.tag == "h2":
                headings.append((anchor, words))
            sections.append(Section(heading=words, anchor=anchor, text=""))
            texts.append([])
        elif token.type == "inline" and i not in drop:
            for child in token.children or []:
                if child.type == "link_open":
                    child.attrSet("href", _site_href(str(child.attrGet("href") or "")))
            texts[-1].append(_plain(token))
        elif token.type in ("fence", "code_block"):
            texts[-1].append(token.content)
        elif token.type in ("th_open", "td_open"):
            _align_by_class(token)
    if not title:
        raise FrontMatterError(f"docs/{slug}.md has no '# ' title")
    for section, parts in zip(sections, texts, strict=True):
        section.text = " ".join(" ".join(parts).split())
    kept = [token for i, token in enumerate(tokens) if i not in drop]
    html = _MD.renderer.render(kept, _MD.options, {})
    return Page(
        slug=slug,
        title=title,
        order=order,
        summary=summary,
        url=f"/docs/{slug}/",
        html=html,
        headings=headings,
        sections=[s for s in sections if s.text or s.heading],
    )


def _load(file: Path) -> Page:
    meta, body = _front_matter(file.read_text(encoding="utf-8"), file.name)
    try:
        order = int(meta.get("order", DEFAULT_ORDER))
    except ValueError:
        raise FrontMatterError(f"{file.name}: order {meta['order']!r} is not a number") from None
    return render_page(body, slug=file.stem, order=order, summary=meta.get("summary", ""))


_loaded: dict[tuple[tuple[str, int, int], ...], dict[str, Page]] = {}


def markdown_pages() -> dict[str, Page]:
    """Every docs/*.md page by slug, rendered once per version of the files."""
    files = sorted(
        f
        for f in DOCS_DIR.glob("*.md")
        if f.stem not in RESERVED_SLUGS and f.stem not in VIEW_PAGES and _MD_LINK.match(f.name)
    )
    key = tuple((f.name, f.stat().st_mtime_ns, f.stat().st_size) for f in files)
    pages = _loaded.get(key)
    if pages is None:  # first use, or a file changed (while someone writes the docs)
        pages = {f.stem: _load(f) for f in files}
        _loaded.clear()
        _loaded[key] = pages
    return pages


def contents() -> list[Page]:
    """The sidebar: Markdown pages and view pages, by order, then title."""
    pages = list(markdown_pages().values())
    for slug, (url_name, title, order, summary) in VIEW_PAGES.items():
        pages.append(
            Page(slug=slug, title=title, order=order, summary=summary, url=reverse(url_name))
        )
    return sorted(pages, key=lambda p: (p.order, p.title.lower()))


def nav(request: HttpRequest) -> dict[str, Any]:
    """Context processor: the sidebar, computed only by the pages that show it."""
    return {"docs_contents": SimpleLazyObject(contents)}


# -- search -------------------------------------------------------------------


class _SectionText(HTMLParser):
    """The text of a view page's <article>, cut at each <h2 id=...>."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0
        self.in_heading = False
        self.sections: list[list[str]] = [["", "", ""]]  # heading, anchor, text

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "article":
            self.depth += 1
        elif self.depth and tag == "h2":
            self.sections.append(["", dict(attrs).get("id") or "", ""])
            self.in_heading = True

    def handle_endtag(self, tag: str) -> None:
        if tag == "article":
            self.depth -= 1
        elif tag == "h2":
            self.in_heading = False

    def handle_data(self, data: str) -> None:
        if not self.depth:
            return
        self.sections[-1][0 if self.in_heading else 2] += data


_view_sections: dict[str, list[Section]] = {}


def view_page_sections(slug: str) -> list[Section]:
    """The sections of a page that a view renders, read from the view's own answer to an
    anonymous GET (once per process: such pages depend on the code, not on the request;
    a request of its own, so that the searcher's session and messages stay untouched)."""
    if slug not in _view_sections:
        url = reverse(VIEW_PAGES[slug][0])
        view: Callable[..., HttpResponse] = resolve(url).func
        blank = HttpRequest()
        blank.method = "GET"
        blank.path = blank.path_info = url
        response = view(blank)
        parser = _SectionText()
        parser.feed(response.content.decode())
        _view_sections[slug] = [
            Section(heading=" ".join(h.split()), anchor=a, text=" ".join(t.split()))
            for h, a, t in parser.sections
            if t.strip() or h.strip()
        ]
    return _view_sections[slug]


@dataclass
class Hit:
    page: Page
    section: Section
    score: int
    url: str
    snippet: list[tuple[str, bool]]  # (text, is a match): the template escapes both


def _snippet(text: str, words: list[str]) -> list[tuple[str, bool]]:
    lower = text.lower()
    first = min((i for w in words if (i := lower.find(w)) >= 0), default=0)
    start = max(0, first - SNIPPET_CHARS // 3)
    if start:  # begin at a word
        space = text.find(" ", start, first)
        start = space + 1 if space >= 0 else start
    end = min(len(text), start + SNIPPET_CHARS)
    piece, lower_piece = text[start:end], lower[start:end]
    pattern = re.compile("|".join(re.escape(w) for w in sorted(words, key=len, reverse=True)))
    parts: list[tuple[str, bool]] = [("…" if start else "", False)]
    at = 0
    for match in pattern.finditer(lower_piece):
        parts.append((piece[at : match.start()], False))
        parts.append((piece[match.start() : match.end()], True))
        at = match.end()
    parts.append((piece[at:] + ("…" if end < len(text) else ""), False))
    return [p for p in parts if p[0]]


def search(query: str) -> list[Hit]:
    """Sections that hold every word of the query (case-insensitive substrings), best
    first: words in the page title and the heading count most."""
    words = list(dict.fromkeys(query.lower().split()))[:MAX_QUERY_WORDS]
    if not words:
        return []
    hits = []
    for page in contents():
        sections = view_page_sections(page.slug) if page.slug in VIEW_PAGES else page.sections
        for section in sections:
            title, heading, text = page.title.lower(), section.heading.lower(), section.text.lower()
            if not all(w in title or w in heading or w in text for w in words):
                continue
            # A word's repeats count a little (a table of 30 rows is not 30 times as
            # relevant); the words side by side, as typed, count more.
            score = sum(
                10 * (w in title) + 5 * (w in heading) + min(text.count(w), 3) for w in words
            )
            if len(words) > 1 and " ".join(words) in f"{heading} {text}":
                score += 5
            url = page.url + (f"#{section.anchor}" if section.anchor else "")
            hits.append(Hit(page, section, score, url, _snippet(section.text, words)))
    hits.sort(key=lambda h: (-h.score, len(h.section.text), h.url))
    return hits[:MAX_HITS]


# -- views --------------------------------------------------------------------


@require_GET
def docs_index(request: HttpRequest) -> HttpResponse:
    return render(request, "docs/index.html", {"pages": contents()})


@require_GET
def docs_page(request: HttpRequest, slug: str) -> HttpResponse:
    page = markdown_pages().get(slug)
    if page is None:
        raise Http404("There is no page of the documentation by that name.")
    return render(request, "docs/page.html", {"page": page})


@require_GET
def docs_search(request: HttpRequest) -> HttpResponse:
    query = request.GET.get("q", "")
    context: dict[str, Any] = {"query": query, "hits": [], "problem": ""}
    if len(query) > MAX_QUERY_CHARS:
        context["query"] = query[:MAX_QUERY_CHARS]
        context["problem"] = (
            f"The search is {len(query):,} characters long; search for at most "
            f"{MAX_QUERY_CHARS} characters."
        )
        return render(request, "docs/search.html", context, status=400)
    context["hits"] = search(query)
    context["words"] = len(query.split())
    context["max_words"] = MAX_QUERY_WORDS
    return render(request, "docs/search.html", context)


app_name = "docs"
urlpatterns = [
    path("", docs_index, name="index"),
    path("search/", docs_search, name="search"),
    path("<slug:slug>/", docs_page, name="page"),
]
