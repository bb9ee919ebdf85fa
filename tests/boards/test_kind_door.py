"""The run kinds registry is the one door between kinds for reads too: a kind that
declares its sections (`RunKind.board_section`, `RunKind.model_section`) appears on the
leaderboard page and on a model's page with no edit to those pages, and one that declares
none adds nothing."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from django import template
from django.utils.html import format_html
from django.utils.safestring import SafeString

from evaluations.models import LanguageModel
from evaluations.runs import lifecycle as runs

pytestmark = pytest.mark.django_db

HERE = __name__


def tiny_board_section(context: template.Context, subject: None) -> SafeString:
    """The tiny kind's section of the leaderboard: it sees the page's query string."""
    asked = context["request"].GET.get("tiny", "")
    return format_html('<section id="tiny-board">Tiny kind board {}</section>', asked)


def tiny_model_section(context: template.Context, model: LanguageModel) -> SafeString:
    return format_html('<section id="tiny-model">Tiny kind on {}</section>', model.name)


def _tiny(**hooks: Any) -> runs.RunKind:
    # Its run model, payload, work and store are never used by the pages read here.
    return runs.RunKind(
        name="tiny",
        model="evaluations.Evaluation",
        payload=f"{HERE}.never",
        work=f"{HERE}.never",
        store=f"{HERE}.never",
        **hooks,
    )


@pytest.fixture
def tiny_kind(monkeypatch: pytest.MonkeyPatch) -> Iterator[runs.RunKind]:
    kind = _tiny(
        board_section=f"{HERE}.tiny_board_section",
        model_section=f"{HERE}.tiny_model_section",
    )
    monkeypatch.setitem(runs.KINDS, kind.name, kind)
    yield kind


def test_a_new_kind_appears_on_the_board_and_the_model_page(anon_client, tiny_kind) -> None:
    LanguageModel.objects.create(name="door-model", source="/tmp/door-model")
    board = anon_client.get("/leaderboard/?tiny=yes").content.decode()
    assert '<section id="tiny-board">Tiny kind board yes</section>' in board
    # After the kinds registered before it (minimal pairs, probing), whose sections stay.
    assert board.index('id="tiny-board"') > board.index('id="h-probing-board"')
    page = anon_client.get("/models/door-model/").content.decode()
    assert '<section id="tiny-model">Tiny kind on door-model</section>' in page
    assert "tiny-board" not in page


def test_a_kind_without_sections_adds_nothing(anon_client, monkeypatch) -> None:
    LanguageModel.objects.create(name="door-model", source="/tmp/door-model")
    before = anon_client.get("/models/door-model/").content.decode()
    monkeypatch.setitem(runs.KINDS, "tiny", _tiny())
    assert anon_client.get("/models/door-model/").content.decode() == before
    assert [k.name for k in runs.kinds_with_sections("model")] == ["training", "pairs", "probing"]
    assert [k.name for k in runs.kinds_with_sections("board")] == ["pairs", "probing"]


def test_reads_a_kind_does_not_declare_are_refused(monkeypatch) -> None:
    kind = _tiny()
    with pytest.raises(ValueError, match="declares no way to read its results"):
        kind.read_results(models=["m"], benchmarks=[])
    with pytest.raises(ValueError, match="declares no board"):
        kind.read_board()
    assert kind.read_chances([]) == {} and kind.read_model_page(None, None) == {}
