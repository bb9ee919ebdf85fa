"""The suite, minimal-pair and probing leaderboards with one training run's checkpoints
as their rows (`?training=<run id>`), ordered by tokens seen: the page, the CSVs and the
API; a hidden checkpoint only for staff; any other value of the filter is a 404."""

from __future__ import annotations

import csv
import io

import pytest

from evaluations.models import LanguageModel, PairEvaluation, ProbingRun
from evaluations.syntaxgym.services import evaluation_create
from evaluations.training import services
from suites.corpora.services import corpus_import
from suites.minimal_pairs.sets import minimal_pair_set_import
from suites.probing.services import probing_task_import
from suites.syntaxgym.services import suite_import
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(training_dirs, tmp_path, alice):
    text = tmp_path / "book.txt"
    text.write_text("the dog barks\nthe dogs bark\na cat sleeps\n")
    book = corpus_import(source=text, name="book", owner=None)
    made = services.training_request(
        corpus=book, name="Book GPT", kind="causal", options={"steps": 16}, user=alice
    )
    # Checkpoints before the last step (whose checkpoint is the finished model itself).
    # Reports in any order: the last checkpoint's, which says retention removed the
    # first, arrives before the first's.
    for step, removed in ((8, ["checkpoint-512"]), (1, []), (2, [])):
        point = {"step": step, "tokens": step * 512, "folder": f"checkpoint-{step * 512}",
                 "train_loss": 1.0, "validation_loss": None, "bytes": 10, "removed": removed}  # fmt: skip
        assert services.training_checkpoint_store(
            run_id=made.pk, attempt=1, point=point, entries=[]
        )
    return made


def assert_checkpoints_as_rows(html: str, run) -> None:
    """The board (or its section) says whose checkpoints its rows are and lists them by
    tokens seen, fewest first."""
    assert (
        f'The checkpoints of <a href="/training/{run.pk}/">training run {run.pk}</a> '
        "(Book GPT) as rows, ordered by tokens seen"
    ) in html
    assert (
        html.index("Book GPT@512</a>")
        < html.index("Book GPT@1024</a>")
        < html.index("Book GPT@4096</a>")
    )


def test_a_training_run_s_checkpoints_as_rows(run, anon_client) -> None:
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    other = LanguageModel.objects.create(name="gpt2", display_name="GPT-2", source="gpt2")
    for name, accuracy in (("book-gpt-512", 0.25), ("book-gpt-4096", 0.75), ("gpt2", 0.9)):
        evaluation_create(
            model=LanguageModel.objects.get(name=name),
            suite=suite,
            content_hash=suite.content_hash,
            snapshot={"meta": {"name": suite.name}},
            status="done",
            accuracy=accuracy,
        )
    # Every model, best first, without the filter.
    data = anon_client.get("/api/leaderboard/").json()
    assert [r["model"] for r in data["rows"]] == ["gpt2", "book-gpt-4096", "book-gpt-512"]
    assert "training" not in data and "tokens" not in data["rows"][0]

    data = anon_client.get(f"/api/leaderboard/?training={run.pk}").json()
    assert data["training"] == run.pk and data["sort"] == "tokens"
    assert [(r["model"], r["tokens"], r["overall"]) for r in data["rows"]] == [
        ("book-gpt-512", 512, 0.25),
        ("book-gpt-1024", 1024, None),  # not evaluated yet: a row all the same
        ("book-gpt-4096", 4096, 0.75),
    ]
    assert other.name not in {r["model"] for r in data["rows"]}
    # Sorting by a column still works, and tokens descending.
    data = anon_client.get(f"/api/leaderboard/?training={run.pk}&sort=overall").json()
    assert [r["model"] for r in data["rows"]] == ["book-gpt-4096", "book-gpt-512", "book-gpt-1024"]
    data = anon_client.get(f"/api/leaderboard/?training={run.pk}&sort=tokens&dir=desc").json()
    assert [r["tokens"] for r in data["rows"]] == [4096, 1024, 512]

    csv = anon_client.get(f"/leaderboard.csv?training={run.pk}").content.decode().splitlines()
    assert csv[0].startswith("model,display_name,tokens,is_baseline,overall,")
    assert [line.split(",")[:3] for line in csv[1:]] == [
        ["book-gpt-512", "Book GPT@512", "512"],
        ["book-gpt-1024", "Book GPT@1024", "1024"],
        ["book-gpt-4096", "Book GPT@4096", "4096"],
    ]
    html = anon_client.get(f"/leaderboard/?training={run.pk}").content.decode()
    assert_checkpoints_as_rows(html, run)
    assert 'data-tokens="512">512 tokens</span> <span class="badge"' in html  # weights removed
    assert f'<input type="hidden" name="training" value="{run.pk}">' in html
    assert f'href="/leaderboard.csv?training={run.pk}"' in html
    assert f"?training={run.pk}&amp;sort=model&amp;dir=asc" in html
    page = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert f'href="/leaderboard/?training={run.pk}">Checkpoints on the leaderboard</a>' in page


BOARD_URLS = (
    "/leaderboard/",
    "/api/leaderboard/",
    "/leaderboard.csv",
    "/api/leaderboard/minimal-pairs/",
    "/leaderboard/minimal-pairs.csv",
    "/api/leaderboard/probing/",
    "/leaderboard/probing.csv",
)


def test_a_bad_training_filter_is_a_404(run, anon_client) -> None:
    for value in (str(run.pk + 1), "abc", "-1", "1.5", "9" * 40, "%00", "1 OR 1=1"):
        for url in BOARD_URLS:
            response = anon_client.get(url, {"training": value})
            assert response.status_code == 404, (url, value)


PAIRS = (
    "sentid\tpairid\tcomparison\tsentence\tROI\tcond\n"
    "1\t1\texpected\tThe dog runs.\t2\tA\n"
    "2\t1\tunexpected\tThe dog run.\t2\tA\n"
)
PROBING = "tr\tNN\tthe dog barks .\ntr\tNNS\tthe dogs bark .\nva\tNN\ta cat .\nte\tNNS\tcats .\n"


def pair_result(name: str, pair_set, accuracy: float) -> None:
    PairEvaluation.objects.create(
        model=LanguageModel.objects.get(name=name),
        pair_set=pair_set,
        content_hash=pair_set.content_hash,
        status="done",
        accuracy=accuracy,
    )


def probing_result(name: str, task, te: float, *, baselines: dict | None = None) -> None:
    ProbingRun.objects.create(
        model=LanguageModel.objects.get(name=name),
        task=task,
        content_hash=task.content_hash,
        status="done",
        best_layer=1,
        best_va=0.9,
        best_te=te,
        baselines=baselines or {},
        confusion={},
    )


def test_the_minimal_pair_board_of_one_run(run, anon_client) -> None:
    pair_set = minimal_pair_set_import(data=PAIRS, name="agreement pairs", owner=None).pair_set
    LanguageModel.objects.create(name="gpt2", display_name="GPT-2", source="gpt2")
    for name, accuracy in (("book-gpt-512", 0.5), ("book-gpt-4096", 1.0), ("gpt2", 0.75)):
        pair_result(name, pair_set, accuracy)
    data = anon_client.get("/api/leaderboard/minimal-pairs/").json()
    assert [r["model"] for r in data["rows"]] == ["book-gpt-4096", "gpt2", "book-gpt-512"]
    assert "training" not in data and "tokens" not in data["rows"][0]

    data = anon_client.get(f"/api/leaderboard/minimal-pairs/?training={run.pk}").json()
    assert data["training"] == run.pk and data["sort"] == "tokens"
    assert [(r["model"], r["tokens"], r["overall"]) for r in data["rows"]] == [
        ("book-gpt-512", 512, 0.5),
        ("book-gpt-1024", 1024, None),  # not evaluated yet: a row all the same
        ("book-gpt-4096", 4096, 1.0),
    ]
    # The section's own sort still sorts it.
    query = f"?training={run.pk}&pairs_sort=overall"
    data = anon_client.get(f"/api/leaderboard/minimal-pairs/{query}").json()
    assert [r["model"] for r in data["rows"]] == ["book-gpt-4096", "book-gpt-512", "book-gpt-1024"]

    lines = anon_client.get(f"/leaderboard/minimal-pairs.csv?training={run.pk}").content
    rows = list(csv.reader(io.StringIO(lines.decode())))
    assert rows[0][:4] == ["model", "display_name", "tokens", "is_baseline"]
    assert [(r[0], r[2], r[4]) for r in rows[1:]] == [
        ("book-gpt-512", "512", "0.5"),
        ("book-gpt-1024", "1024", ""),
        ("book-gpt-4096", "4096", "1.0"),
    ]

    html = anon_client.get(f"/leaderboard/?training={run.pk}").content.decode()
    section = html[html.index('id="minimal-pairs"') : html.index('id="probing"')]
    assert_checkpoints_as_rows(section, run)
    assert "GPT-2</a>" not in section
    assert 'data-tokens="512">512 tokens</span> <span class="badge"' in section  # weights removed
    assert f'href="/leaderboard/minimal-pairs.csv?training={run.pk}"' in section
    assert f"?training={run.pk}&amp;pairs_sort=model&amp;pairs_dir=asc#minimal-pairs" in section
    page = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert f'href="/leaderboard/?training={run.pk}#minimal-pairs">' in page


def test_the_probing_board_of_one_run(run, alice, anon_client) -> None:
    task = probing_task_import(source=PROBING, name="toy", owner=alice, task_type="subj_number")
    LanguageModel.objects.create(name="gpt2", display_name="GPT-2", source="gpt2")
    # The length baseline comes from a run of a model that is not a checkpoint: the
    # baseline rows are the whole board's all the same.
    probing_result("gpt2", task, 0.9, baselines={"length": {"te_accuracy": 0.6}})
    probing_result("book-gpt-4096", task, 0.8)
    probing_result("book-gpt-512", task, 0.55)
    data = anon_client.get("/api/leaderboard/probing/").json()
    assert [r["model"] for r in data["rows"]] == ["gpt2", "book-gpt-4096", "book-gpt-512"]
    assert "training" not in data and "tokens" not in data["rows"][0]

    data = anon_client.get(f"/api/leaderboard/probing/?training={run.pk}").json()
    assert data["training"] == run.pk
    assert [(r["model"], r["tokens"], r["mean"]) for r in data["rows"]] == [
        ("book-gpt-512", 512, 0.55),
        ("book-gpt-1024", 1024, None),
        ("book-gpt-4096", 4096, 0.8),
    ]
    assert data["rows"][1]["cells"] == {"toy": None}
    assert data["baselines"]["toy"]["length"] == 0.6

    lines = anon_client.get(f"/leaderboard/probing.csv?training={run.pk}").content
    rows = list(csv.reader(io.StringIO(lines.decode())))
    assert rows[0][:5] == ["model", "tokens", "pooling", "probe", "toy"]
    assert [(r[0], r[1], r[4]) for r in rows[1:4]] == [
        ("book-gpt-512", "512", "0.55"),
        ("book-gpt-1024", "1024", ""),
        ("book-gpt-4096", "4096", "0.8"),
    ]
    assert rows[4][:5] == ["baseline:majority", "", "", "", "0.0"]
    assert {len(r) for r in rows} == {len(rows[0])}

    html = anon_client.get(f"/leaderboard/?training={run.pk}").content.decode()
    section = html[html.index('id="probing"') :]
    assert_checkpoints_as_rows(section, run)
    assert "GPT-2</a>" not in section
    assert 'data-tokens="1024">1024 tokens</span>' in section
    assert f'<input type="hidden" name="training" value="{run.pk}">' in section
    assert (
        f"/leaderboard/probing.csv?pooling=mean&amp;probe=logreg&amp;training={run.pk}" in section
    )
    page = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert f'href="/leaderboard/?training={run.pk}#probing">' in page


def test_a_hidden_checkpoint_is_for_staff_only(run, alice, anon_client, dana_client) -> None:
    pair_set = minimal_pair_set_import(data=PAIRS, name="agreement pairs", owner=None).pair_set
    task = probing_task_import(source=PROBING, name="toy", owner=alice, task_type="subj_number")
    for name in ("book-gpt-512", "book-gpt-1024"):
        pair_result(name, pair_set, 0.5)
        probing_result(name, task, 0.5)
    LanguageModel.objects.filter(name="book-gpt-1024").update(is_hidden=True)
    for url in (
        "/api/leaderboard/",
        "/api/leaderboard/minimal-pairs/",
        "/api/leaderboard/probing/",
    ):
        shown = [r["model"] for r in anon_client.get(url, {"training": run.pk}).json()["rows"]]
        assert shown == ["book-gpt-512", "book-gpt-4096"], url
        shown = [r["model"] for r in dana_client.get(url, {"training": run.pk}).json()["rows"]]
        assert shown == ["book-gpt-512", "book-gpt-1024", "book-gpt-4096"], url
