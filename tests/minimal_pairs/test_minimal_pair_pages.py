"""Minimal-pair result pages, the leaderboard section and the model and set pages' lists.

Runs are stored as the store task stores them (packed token surprisals per sentence),
with hand-chosen surprisals, so that every number on the page can be checked by hand:

    sentence tokens          The dog runs .      ROI: word 2 ("runs", with "." under
    pair 1 (A) expected      5   8   2    1      punctuation=previous)
               unexpected    5   8   6    1
    pair 2 (A) expected      5   9   3    1
               unexpected    5   9   3    5
    pair 3 (B) expected      4   7   6    1
               unexpected    4   7   2    1

Defaults (surp, mean, previous): ROI values 1.5/3.5, 2/4, 3.5/1.5: pairs 1 and 2 pass,
pair 3 fails; accuracy 2/3. punctuation=separate: 2/6 pass, 3/3 a tie, 6/2 fail: 1/3.
"""

from __future__ import annotations

import csv
import html
import io
import re
from collections.abc import Sequence
from typing import Any, NamedTuple

import pytest
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from evaluations import statistics
from evaluations.minimal_pairs import results as pair_results
from evaluations.models import LanguageModel, PairEvaluation, PairSentenceTokens
from evaluations.token_data import pack_tokens
from suites.formats import minimal_pairs as mp
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, PairSetVersion
from tests.conftest import search

pytestmark = pytest.mark.django_db

HEADER = "sentid\tpairid\tcomparison\tsentence\tROI\tcond\n"
SENTENCES = [
    ("1", "expected", "The dog runs.", "A"),
    ("1", "unexpected", "The dog run.", "A"),
    ("2", "expected", "The dogs run.", "A"),
    ("2", "unexpected", "The dogs runs.", "A"),
    ("3", "expected", "A cat sleeps.", "B"),
    ("3", "unexpected", "A cat sleep.", "B"),
]
SURPRISALS = [[5, 8, 2, 1], [5, 8, 6, 1], [5, 9, 3, 1], [5, 9, 3, 5], [4, 7, 6, 1], [4, 7, 2, 1]]


class Token(NamedTuple):
    text: str
    start: int
    end: int
    surprisal: float | None


def small_tsv(copies: int = 1) -> str:
    """The six sentences above, `copies` times (pair ids 1..3*copies)."""
    lines = [HEADER]
    for copy in range(copies):
        for index, (pair, label, sentence, cond) in enumerate(SENTENCES):
            sentid = copy * len(SENTENCES) + index + 1
            pairid = copy * 3 + int(pair)
            lines.append(f"{sentid}\t{pairid}\t{label}\t{sentence}\t2\t{cond}\n")
    return "".join(lines)


def word_tokens(sentence: str, surprisals: Sequence[float | None]) -> list[Token]:
    """One token per word of the set's own words (punctuation its own token)."""
    words = mp.split_words(sentence)
    assert len(words) == len(surprisals), sentence
    return [
        Token(f" {w.text}" if i and not w.punctuation else w.text, w.start, w.end, s)
        for i, (w, s) in enumerate(zip(words, surprisals, strict=True))
    ]


def store_run(
    model: LanguageModel,
    pair_set: MinimalPairSet,
    *,
    status: str = PairEvaluation.Status.DONE,
    content_hash: str | None = None,
) -> PairEvaluation:
    """A run with the surprisals above for every copy of the six sentences, stored as
    the store task stores them; accuracy and ties under the default options."""
    run = PairEvaluation.objects.create(
        model=model,
        pair_set=pair_set,
        content_hash=content_hash or pair_set.content_hash,
        status=status,
        progress_total=pair_set.sentence_count,
        progress_done=pair_set.sentence_count if status == "done" else 2,
        finished_at=timezone.now() if status == "done" else None,
    )
    if status != PairEvaluation.Status.DONE:
        return run
    data = pair_sets.pair_set_data(pair_set)
    if run.outdated:
        # A run on an earlier content: kept as a replace keeps it (same sentences here).
        PairSetVersion.objects.get_or_create(
            pair_set=pair_set,
            content_hash=run.content_hash,
            defaults={
                "columns": data.columns,
                "condition_columns": data.condition_columns,
                "sentences": [
                    [s.sentid, s.sentence, s.pairid, s.comparison, s.roi, s.conditions]
                    for s in data.sentences
                ],
            },
        )
    PairSentenceTokens.objects.bulk_create(
        PairSentenceTokens(
            evaluation=run,
            position=i,
            sentid=s.sentid,
            tokens=pack_tokens(word_tokens(s.sentence, SURPRISALS[i % len(SURPRISALS)])),
        )
        for i, s in enumerate(data.sentences)
    )
    analysis = pair_results.analyze_evaluation(run, pair_results.DEFAULT_OPTIONS)
    assert analysis.by_pair is not None
    by_pair = analysis.by_pair.as_dicts()
    run.accuracy = sum(bool(r["acc"]) for r in by_pair) / len(by_pair)
    run.ties = sum(bool(r["tie"]) for r in by_pair)
    run.save(update_fields=["accuracy", "ties"])
    return run


def make_set(name: str, *, copies: int = 1, owner: Any = None, tags: Sequence[str] = ()) -> Any:
    return pair_sets.minimal_pair_set_import(
        data=small_tsv(copies), name=name, owner=owner, tags=tags
    ).pair_set


@pytest.fixture
def model() -> LanguageModel:
    return LanguageModel.objects.create(name="tiny-lm", display_name="Tiny LM", source="hub/tiny")


@pytest.fixture
def run(alice, model) -> PairEvaluation:
    return store_run(model, make_set("agreement pairs", owner=alice, tags=["agreement"]))


def url(run: PairEvaluation, query: str = "") -> str:
    return f"/pairs/evaluations/{run.pk}/{query}"


def pair_order(page: str) -> list[str]:
    return re.findall(r'data-pairid="([^"]+)"', page)


def card(page: str, name: str) -> str:
    match = re.search(rf'data-card="{name}"><span class="value[^"]*"[^>]*>([^<]*)<', page)
    assert match, name
    return match.group(1)


# --- the result page -------------------------------------------------------------------------


def test_result_page_cards_tables_and_failing_pairs_first(anon_client, run) -> None:
    assert run.accuracy == pytest.approx(2 / 3)
    response = anon_client.get(url(run))
    assert response.status_code == 200
    page = response.content.decode()
    assert card(page, "accuracy") == "0.67"
    assert "2 of 3 pairs" in page
    assert (card(page, "pairs"), card(page, "ties"), card(page, "outdated")) == (
        "3",
        "0",
        "current",
    )
    interval = statistics.wilson_interval(2, 3)
    assert interval is not None
    low, high = interval
    assert f"95% Wilson interval {low:.2f}–{high:.2f}" in page
    # Grouped by the set's first condition column by default: A 2/2, B 0/1.
    result = response.context["result"]
    assert result.options.conditions == ("cond",)
    assert [(g.values, g.acc, g.pairs) for g in result.summary.groups] == [
        (("A",), 1.0, 2),
        (("B",), 0.0, 1),
    ]
    group_b = result.summary.groups[1]
    assert (group_b.expected, group_b.unexpected, group_b.diff) == (3.5, 1.5, 2.0)
    assert "Wilson score interval" in page  # the chart says which interval it draws
    assert pair_order(page) == ["3", "1", "2"]  # the failing pair first


def test_words_show_values_and_roi_under_the_options(anon_client, run) -> None:
    page = anon_client.get(url(run)).content.decode()
    # Sentence 1 (pair 1, expected), punctuation folded into "runs.": mean of 2 and 1.
    sentence = search(r'data-sentid="1">(.*?)</div>', page, re.S).group(1)
    words = re.findall(
        r'<span class="pw( roi)?"[^>]*>(?:<mark>|<span class="pw-text">)([^<]*)<', sentence
    )
    values = re.findall(r'<span class="pw-value">([^<]*)<', sentence)
    assert [(w, bool(r)) for r, w in words] == [("The", False), ("dog", False), ("runs.", True)]
    assert values == ["5.00", "8.00", "1.50"]
    separate = anon_client.get(url(run, "?punctuation=separate")).content.decode()
    sentence = search(r'data-sentid="1">(.*?)</div>', separate, re.S).group(1)
    assert re.findall(r'<span class="pw-value">([^<]*)<', sentence) == [
        "5.00",
        "8.00",
        "2.00",
        "1.00",
    ]


def test_options_in_the_query_string_change_the_numbers(anon_client, run) -> None:
    separate = anon_client.get(url(run, "?punctuation=separate&conditions="))
    assert separate.status_code == 200
    page = separate.content.decode()
    assert (card(page, "accuracy"), card(page, "ties")) == ("0.33", "1")
    assert separate.context["result"].summary.groups[0].values == ()  # no grouping
    assert pair_order(page) == ["2", "3", "1"]  # the tie and the failure, then the pass
    assert "= tie" in page
    assert "data-options-note" in page  # differs from the leaderboard's options
    summed = anon_client.get(url(run, "?word_summary=sum")).context["result"]
    assert [
        (round(float(e), 6), round(float(u), 6))
        for e, u in zip(summed.summary.expected, summed.summary.unexpected, strict=True)
    ] == [
        (7.0, 3.0),
        (3.0, 7.0),
        (4.0, 8.0),
    ]
    prob = anon_client.get(url(run, "?pred_measure=prob")).context["result"].summary
    assert prob.passed == 2 and prob.options.pred_measure == "prob"
    assert "data-options-note" not in anon_client.get(url(run)).content.decode()


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ("?pred_measure=loudness", "pred_measure"),
        ("?punctuation=nowhere", "punctuation"),
        ("?conditions=colour", "colour"),
        ("?cond=7", "cond=&#x27;7&#x27; is not a condition group"),
        ("?cond=two", "is not a condition group"),
        ("?cond=x%00", "Bad request"),  # the request guard answers NUL first
        ("?show=everything", "show=&#x27;everything&#x27;"),
    ],
)
def test_bad_options_are_a_400_page_that_says_why(anon_client, run, query, message) -> None:
    response = anon_client.get(url(run, query))
    assert response.status_code == 400
    assert message in response.content.decode()


def test_condition_filter_tabs_and_paging(anon_client, model) -> None:
    big = store_run(model, make_set("many pairs", copies=40))  # 120 pairs: 80 A, 40 B
    first = anon_client.get(url(big)).context["result"]
    assert (first.page.paginator.count, first.page.paginator.num_pages, len(first.rows)) == (
        120,
        3,
        50,
    )
    assert all(not r.acc for r in first.rows[:40]) and all(r.acc for r in first.rows[40:])
    only_a = anon_client.get(url(big, "?cond=1")).context["result"]
    assert only_a.group.values == ("A",) and only_a.counts["all"] == 80
    assert {r.group.values for r in only_a.rows} == {("A",)}
    failing_b = anon_client.get(url(big, "?cond=2&show=failing&page=1")).context["result"]
    assert failing_b.counts == {"all": 40, "failing": 40, "passing": 0, "ties": 0}
    passing_b = anon_client.get(url(big, "?cond=2&show=passing"))
    assert "data-no-pairs" in passing_b.content.decode()
    last = anon_client.get(url(big, "?page=3")).context["result"]
    assert len(last.rows) == 20 and [r.pairid for r in last.rows][-1] == "119"


def test_query_count_does_not_grow_with_the_set(anon_client, model) -> None:
    small = store_run(model, make_set("small"))
    big = store_run(model, make_set("big", copies=60))

    def count(run: PairEvaluation, query: str = "") -> int:
        with CaptureQueriesContext(connection) as queries:
            assert anon_client.get(url(run, query)).status_code == 200
        return len(queries.captured_queries)

    cold = [count(small), count(big)]
    warm = [count(small), count(big)]
    assert cold[0] == cold[1] and warm[0] == warm[1]
    # The analysis is computed once, then read from the cache: a warm page does not read
    # the whole set's tokens and sentences again.
    assert warm[0] < cold[0]
    assert count(big, "?page=4&cond=2") == warm[1]


def test_a_retry_is_analysed_afresh(anon_client, run) -> None:
    assert card(anon_client.get(url(run)).content.decode(), "accuracy") == "0.67"
    # A later attempt stored other tokens (pair 3 now passes).
    tokens = PairSentenceTokens.objects.get(evaluation=run, sentid="5")
    tokens.tokens = pack_tokens(word_tokens("A cat sleeps.", [4, 7, 1, 1]))
    tokens.save()
    PairEvaluation.objects.filter(pk=run.pk).update(attempt=2, finished_at=timezone.now())
    assert card(anon_client.get(url(run)).content.decode(), "accuracy") == "1.00"


def test_a_running_run_shows_its_progress(anon_client, model) -> None:
    running = store_run(model, make_set("in progress"), status=PairEvaluation.Status.RUNNING)
    response = anon_client.get(url(running))
    assert response.status_code == 200
    page = response.content.decode()
    assert "data-status>Running" in page and "2 / 6" in page
    assert f'data-api="/api/pairs/evaluations/{running.pk}/"' in page
    assert "pair-plot" not in page
    # No table downloads until it is done (the API says why).
    assert "/by_cond/" not in page
    table = anon_client.get(f"/api/pairs/evaluations/{running.pk}/by_cond/?format=tsv")
    assert table.status_code == 409


def test_outdated_and_hidden_runs_stay_readable_and_say_so(anon_client, run) -> None:
    pair_sets.minimal_pair_set_replace(
        pair_set=run.pair_set, user=run.pair_set.owner, data=small_tsv(2)
    )
    LanguageModel.objects.filter(pk=run.model_id).update(is_hidden=True)
    page = anon_client.get(url(run)).content.decode()
    assert card(page, "outdated") == "outdated" and "Outdated:" in page
    assert ">hidden</span>" in page
    assert anon_client.get("/pairs/evaluations/987654/").status_code == 404


def downloads(page: str) -> dict[str, tuple[str, str]]:
    """The page's table downloads: table -> (address, file name)."""
    found = re.findall(
        r'href="(/api/pairs/evaluations/\d+/(\w+)/\?[^"]*)" download="([^"]+)"', page
    )
    return {table: (html.unescape(href), name) for href, table, name in found}


def tsv_rows(response: Any) -> list[list[str]]:
    assert response.status_code == 200, response.content[:300]
    return list(csv.reader(io.StringIO(response.content.decode()), delimiter="\t"))


def test_the_four_tables_download_under_the_page_options(anon_client, run) -> None:
    links = downloads(anon_client.get(url(run)).content.decode())
    assert {t: name for t, (_, name) in links.items()} == {
        "tokens": "agreement-pairs__tiny-lm_predictions.tsv",
        "by_word": "agreement-pairs__tiny-lm_byword.tsv",
        "by_pair": "agreement-pairs__tiny-lm_bypair.tsv",
        "by_cond": "agreement-pairs__tiny-lm.tsv",
    }
    tokens = tsv_rows(anon_client.get(links["tokens"][0]))
    assert tokens[0] == ["token", "sentid", "word", "wordpos", "model", "tokenizer",
                         "punctuation", "prob", "surp"]  # fmt: skip
    assert len(tokens) == 1 + 4 * 6
    by_cond = tsv_rows(anon_client.get(links["by_cond"][0]))
    assert by_cond[0] == ["", "model", "cond", "acc", "diff", "expected", "unexpected",
                          "macrodiff", "pairs", "ties"]  # fmt: skip
    assert [(r[2], float(r[3])) for r in by_cond[1:]] == [("A", 1.0), ("B", 0.0)]
    assert tsv_rows(anon_client.get(links["by_word"][0]))[0][-1] == "word"
    # Under other options the links carry them: pair 2 becomes a tie.
    page = anon_client.get(url(run, "?punctuation=separate&conditions=")).content.decode()
    by_pair = tsv_rows(anon_client.get(downloads(page)["by_pair"][0]))
    assert by_pair[0][1:] == ["model", "pairid", "expected", "unexpected", "diff", "acc", "tie"]
    assert [r[-1] for r in by_pair[1:]] == ["False", "True", "False"]


# --- leaderboard, model and set pages -------------------------------------------------------


@pytest.fixture
def board(alice, model) -> dict[str, Any]:
    """Two sets tagged agreement (one also npi), one untagged; two visible models and a
    hidden one; an outdated run that must not count. Tiny LM has all three sets, Other LM
    agr-one and plain, so the overall score compares both on agr-one and plain."""
    sets = {
        "agr-one": make_set("agr-one", owner=alice, tags=["agreement"]),
        "agr-npi": make_set("agr-npi", copies=2, owner=alice, tags=["agreement", "npi"]),
        "plain": make_set("plain", owner=alice),
    }
    other = LanguageModel.objects.create(name="other", display_name="Other LM", source="hub/o")
    hidden = LanguageModel.objects.create(
        name="secret", display_name="Secret LM", source="hub/s", is_hidden=True
    )
    runs = {
        ("tiny-lm", "agr-one"): store_run(model, sets["agr-one"]),
        ("tiny-lm", "agr-npi"): store_run(model, sets["agr-npi"]),
        ("tiny-lm", "plain"): store_run(model, sets["plain"]),
        ("other", "plain"): store_run(other, sets["plain"]),
        ("other", "agr-one"): store_run(other, sets["agr-one"]),
        # An earlier content of agr-one: outdated, left out.
        ("other", "agr-one-old"): store_run(other, sets["agr-one"], content_hash="f" * 64),
        ("secret", "plain"): store_run(hidden, sets["plain"]),
    }
    PairEvaluation.objects.filter(pk=runs[("other", "plain")].pk).update(accuracy=0.25, ties=1)
    PairEvaluation.objects.filter(pk=runs[("other", "agr-one-old")].pk).update(accuracy=0.0)
    return {"sets": sets, "runs": runs}


def test_leaderboard_section_json_and_csv(anon_client, dana_client, board) -> None:
    data = anon_client.get("/api/leaderboard/minimal-pairs/").json()
    assert [g["tag"] for g in data["groups"]] == ["agreement", "npi", "untagged"]
    assert [s["name"] for s in data["sets"]] == ["agr-npi", "agr-one", "plain"]
    assert data["compared_sets"] == ["agr-one", "plain"]  # the sets both models have
    rows = {r["model"]: r for r in data["rows"]}
    assert set(rows) == {"tiny-lm", "other"}  # hidden left out
    tiny, other = rows["tiny-lm"], rows["other"]
    assert tiny["scores"]["agr-one"]["accuracy"] == pytest.approx(2 / 3)
    assert tiny["scores"]["agr-one"]["evaluation"] == board["runs"][("tiny-lm", "agr-one")].pk
    assert (tiny["overall"], tiny["covered"], tiny["total"]) == (pytest.approx(2 / 3), 3, 3)
    # The outdated run of "other" on agr-one (accuracy 0) does not count; the current does.
    assert other["scores"]["agr-one"]["evaluation"] == board["runs"][("other", "agr-one")].pk
    assert other["overall"] == pytest.approx((2 / 3 + 0.25) / 2)
    assert (other["covered"], other["ties"], other["overall_sets"]) == (2, 1, 2)
    assert other["group_means"]["agreement"] == pytest.approx(2 / 3)
    assert [r["model"] for r in data["rows"]] == ["tiny-lm", "other"]  # best overall first
    staff = dana_client.get("/api/leaderboard/minimal-pairs/?pairs_sort=model").json()
    assert [r["model"] for r in staff["rows"]] == ["other", "secret", "tiny-lm"]
    npi = anon_client.get("/api/leaderboard/minimal-pairs/?tag=npi").json()
    assert [s["name"] for s in npi["sets"]] == ["agr-npi"]

    response = anon_client.get("/leaderboard/minimal-pairs.csv?tag=agreement")
    assert response["Content-Disposition"].endswith('leaderboard-minimal-pairs-agreement.csv"')
    table = list(csv.DictReader(io.StringIO(response.content.decode())))
    # Compared on agr-one alone, both score 2/3: equal scores in name order.
    assert [r["model"] for r in table] == ["other", "tiny-lm"]
    tiny_row = table[1]
    assert float(tiny_row["agr-one"]) == float(tiny_row["agr-npi"]) == pytest.approx(2 / 3)
    assert (tiny_row["sets_scored"], tiny_row["sets_total"], tiny_row["overall_sets"]) == (
        "2",
        "2",
        "1",
    )
    assert tiny_row["group:agreement"] == repr(2 / 3)
    assert table[0]["agr-npi"] == ""


def test_leaderboard_page_shows_both_sections(anon_client, board) -> None:
    page = anon_client.get("/leaderboard/").content.decode()
    section = page[page.index('id="minimal-pairs"') :]
    run = board["runs"][("tiny-lm", "agr-one")]
    assert f'href="/pairs/evaluations/{run.pk}/"' in section
    assert "Secret LM" not in section and "Other LM" in section
    missing = board["sets"]["agr-npi"].name
    assert (
        f'href="/pairs/evaluations/new/?model=other&amp;pair_set={missing}" '
        f'title="No result for Other LM on {missing}: queue it"'
    ) in section
    assert "?pairs_sort=model&amp;pairs_dir=asc#minimal-pairs" in section
    # The page says which sets the overall score is over, and marks the one left out.
    text = " ".join(re.sub(r"<[^>]+>", " ", section).split())
    assert "Overall score and group means over 2 of 3 sets : those every model shown" in text
    assert "the others are marked °" in text
    left_out = re.findall(r'<th scope="col" class="lb-rot lb-out"[^>]*>.*?</th>', section)
    # agr-npi is in two tag groups: both its columns, and no other, are marked.
    assert len(left_out) == 2 and all(f"</b> {missing}</span>" in th for th in left_out)
    sorted_page = anon_client.get("/leaderboard/?pairs_sort=model&pairs_dir=asc").content.decode()
    section = sorted_page[sorted_page.index('id="minimal-pairs"') :]
    assert section.index("Other LM") < section.index("Tiny LM")


def test_leaderboard_section_empty_states(anon_client) -> None:
    page = anon_client.get("/leaderboard/").content.decode()
    assert "There are no minimal-pair sets yet" in page
    make_set("lonely")
    assert "No minimal-pair results yet" in anon_client.get("/leaderboard/").content.decode()


def test_model_and_set_pages_list_pair_results(anon_client, dana_client, board) -> None:
    page = anon_client.get("/models/other/").content.decode()
    section = page[page.index('id="h-model-pairs"') :]
    # Current results best first (agr-one 0.67, plain 0.25), then the outdated one.
    order = [
        section.index(f"/pairs/evaluations/{board['runs'][('other', key)].pk}/")
        for key in ("agr-one", "plain", "agr-one-old")
    ]
    assert order == sorted(order)
    assert "0.25" in section and "outdated" in section
    set_page = anon_client.get("/minimal-pairs/plain/").content.decode()
    assert "Other LM" in set_page and "Secret LM" not in set_page
    assert "Secret LM" in dana_client.get("/minimal-pairs/plain/").content.decode()
    empty = LanguageModel.objects.create(name="new", display_name="New LM", source="hub/n")
    assert "data-no-pair-results" in anon_client.get(empty.get_absolute_url()).content.decode()
    cache.clear()


def test_default_grouping_that_does_not_fit_groups_nothing(anon_client, model) -> None:
    # The first condition column, "verb", differs within each pair; "cond" does not.
    tsv = "sentid\tpairid\tcomparison\tsentence\tROI\tverb\tcond\n" + "".join(
        f"{i + 1}\t{pair}\t{label}\t{sentence}\t2\t{sentence.split()[2]}\t{cond}\n"
        for i, (pair, label, sentence, cond) in enumerate(SENTENCES)
    )
    pair_set = pair_sets.minimal_pair_set_import(data=tsv, name="mixed", owner=None).pair_set
    assert pair_set.condition_columns == ["verb", "cond"]
    run = store_run(model, pair_set)
    response = anon_client.get(url(run))
    assert response.status_code == 200
    assert response.context["result"].options.conditions == ()
    assert card(response.content.decode(), "accuracy") == "0.67"
    # Asked for explicitly, the same grouping is a 400 that names the pair and column.
    bad = anon_client.get(url(run, "?conditions=verb"))
    assert bad.status_code == 400 and "mixes values of the condition column" in bad.content.decode()
    # The answer is cached: asking again does not read the set's tokens.
    with CaptureQueriesContext(connection) as again:
        assert anon_client.get(url(run, "?conditions=verb")).status_code == 400
    assert not any("pairsentencetokens" in q["sql"] for q in again.captured_queries)


def test_the_store_warms_a_shared_cache_for_the_first_view(
    settings, anon_client, model, django_capture_on_commit_callbacks
) -> None:
    from evaluations.minimal_pairs import services as pair_services
    from tests.celery_harness import redis_or_skip

    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": redis_or_skip(),
            "KEY_PREFIX": "pair-pages-test",
        }
    }
    cache.clear()
    pair_set = make_set("warm")
    run = PairEvaluation.objects.create(
        model=model, pair_set=pair_set, content_hash=pair_set.content_hash, enqueued=True
    )
    data = pair_sets.pair_set_data(pair_set)
    results = {
        "sentences": [
            pack_tokens(word_tokens(s.sentence, SURPRISALS[i]))
            for i, s in enumerate(data.sentences)
        ],
        "model_info": {"tokenizer": "tiny"},
    }
    with django_capture_on_commit_callbacks(execute=True):
        assert pair_services.pair_results_store(run_id=run.pk, attempt=1, results=results)
    with CaptureQueriesContext(connection) as first_view:
        page = anon_client.get(url(run))
    assert page.status_code == 200 and card(page.content.decode(), "accuracy") == "0.67"
    assert not any(
        "pairsentencetokens" in q["sql"] and "IN" not in q["sql"]
        for q in first_view.captured_queries
    )
    cache.clear()
