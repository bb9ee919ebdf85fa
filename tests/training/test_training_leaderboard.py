"""The suite leaderboard with one training run's checkpoints as its rows
(`?training=<run id>`), ordered by tokens seen: the page, the CSV and the API; any other
value of the filter is a 404."""

from __future__ import annotations

import pytest

from evaluations.models import Evaluation, LanguageModel
from evaluations.training import services
from suites.corpora.services import corpus_import
from suites.syntaxgym.services import suite_import
from tests.conftest import EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def run(settings, tmp_path, alice):
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    settings.GYM_TRAINING_DIR = tmp_path / "trained"
    text = tmp_path / "book.txt"
    text.write_text("the dog barks\nthe dogs bark\na cat sleeps\n")
    book = corpus_import(source=text, name="book", owner=None)
    made = services.training_request(
        corpus=book, name="Book GPT", kind="causal", options={"steps": 8}, user=alice
    )
    # Reports in any order: the last checkpoint's, which says retention removed the
    # first, arrives before the first's.
    for step, removed in ((8, ["checkpoint-512"]), (1, []), (2, [])):
        point = {"step": step, "tokens": step * 512, "folder": f"checkpoint-{step * 512}",
                 "train_loss": 1.0, "validation_loss": None, "bytes": 10, "removed": removed}  # fmt: skip
        assert services.training_checkpoint_store(
            run_id=made.pk, attempt=1, point=point, entries=[]
        )
    return made


def test_a_training_run_s_checkpoints_as_rows(run, anon_client) -> None:
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    other = LanguageModel.objects.create(name="gpt2", display_name="GPT-2", source="gpt2")
    for name, accuracy in (("book-gpt-512", 0.25), ("book-gpt-4096", 0.75), ("gpt2", 0.9)):
        Evaluation.objects.create(
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
    assert (
        f'The checkpoints of <a href="/training/{run.pk}/">training run {run.pk}</a> '
        "(Book GPT) as rows, ordered by tokens seen"
    ) in html
    assert (
        html.index("Book GPT@512</a>")
        < html.index("Book GPT@1024</a>")
        < html.index("Book GPT@4096</a>")
    )
    assert 'data-tokens="512">512 tokens</span> <span class="badge"' in html  # weights removed
    assert f'<input type="hidden" name="training" value="{run.pk}">' in html
    assert f'href="/leaderboard.csv?training={run.pk}"' in html
    assert f"?training={run.pk}&amp;sort=model&amp;dir=asc" in html
    page = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert f'href="/leaderboard/?training={run.pk}">Checkpoints on the leaderboard</a>' in page


def test_a_bad_training_filter_is_a_404(run, anon_client) -> None:
    for value in (str(run.pk + 1), "abc", "-1", "1.5", "9" * 40, "%00", "1 OR 1=1"):
        for url in ("/leaderboard/", "/api/leaderboard/", "/leaderboard.csv"):
            response = anon_client.get(url, {"training": value})
            assert response.status_code == 404, (url, value)
