"""The corpus check: how many sentences of a run's suites, minimal-pair sets and probing
tasks are lines of its training corpus (after one normalisation), before training (the
API the form asks) and on the run's page and API; cached, read once; the example corpus
holds none of the example benchmarks' sentences."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.management import call_command

from evaluations.training import corpus_check, services
from gym import artifact_cache, artifacts
from gym.embedded import EXAMPLE_CORPUS, PREPARE
from suites.corpora import overlap
from suites.corpora.models import Corpus
from suites.corpora.services import corpus_import
from suites.models import MinimalPairSet, ProbingTask, Suite
from suites.syntaxgym.services import suite_import
from tests.conftest import EXAMPLES, REPO
from tests.training.conftest import example_pair_set, example_probing_task

pytestmark = pytest.mark.django_db

# Lines of a corpus: two of the suite's sentences (one in capitals, with doubled spaces
# and a spaced full stop), one of the pair set's (with '!'), one of the probing task's, and
# one of the suite's inside a longer line (not counted: lines are compared whole).
CORPUS = """the teacher is in the classroom
THE TEACHERS  ARE IN THE CLASSROOM .
A dog slept.
The key to the cabinets is on the table!
the students were in the kitchen
Yes. The dog was hungry after the walk.
"""


@pytest.fixture(autouse=True)
def corpus_dir(training_dirs) -> None:
    pass


@pytest.fixture
def benchmarks() -> tuple[Suite, MinimalPairSet, ProbingTask]:
    suite = suite_import(source=(EXAMPLES / "agreement_local.json").read_text(), owner=None).suite
    return suite, example_pair_set(), example_probing_task()


@pytest.fixture
def corpus(tmp_path: Path) -> Corpus:
    path = tmp_path / "mixed.txt"
    path.write_text(CORPUS, encoding="utf-8")
    return corpus_import(source=path, name="mixed", owner=None)


def test_normalisation() -> None:
    same = [
        "The keys to the cabinet are on the table.",
        "  the KEYS to the\tcabinet  are on the table . ",
        "The keys to the cabinet are on the table?!",
        "The keys to the\ncabinet are on the table",
    ]
    assert {overlap.normalised(s) for s in same} == {"the keys to the cabinet are on the table"}
    # Unicode: composed and decomposed accents, and case folding beyond lowercase.
    assert overlap.normalised("E\u0301cole\u0301 STRASSE") == overlap.normalised("écolé straße")
    assert overlap.normalised("Well , no ; yes : maybe") == "well, no; yes: maybe"
    assert overlap.normalised("...") == ""
    assert overlap.normalised_lines("A b .\n C  d\n") == ["a b", "c d", ""]


def test_the_corpus_is_read_in_blocks_of_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "lines.txt"
    text = "".join(f"line {n} {'x' * (n % 7)}\n" for n in range(200))
    path.write_text(text)
    parts = list(overlap.blocks(path, size=16))
    assert "".join(parts) == text
    longest = max(len(line) + 1 for line in text.splitlines())
    assert all(p.endswith("\n") and len(p) < 16 + longest for p in parts)
    assert len(parts) > 100  # read a block at a time, never whole


def test_counts_per_benchmark(corpus, benchmarks) -> None:
    check = corpus_check.corpus_check(corpus, list(benchmarks))
    assert check["error"] == "" and check["found"] == 3
    rows = {row["kind"]: row for row in check["benchmarks"]}
    assert (rows["suite"]["sentences"], rows["suite"]["found"]) == (80, 2)
    assert rows["suite"]["share"] == 2 / 80
    assert rows["suite"]["examples"] == [
        "the teacher is in the classroom",
        "the teachers are in the classroom",
    ]
    assert (rows["pairs"]["sentences"], rows["pairs"]["found"]) == (14, 1)
    # The probing task's 300 lines hold 281 distinct sentences.
    assert (rows["probing"]["sentences"], rows["probing"]["found"]) == (281, 1)


def test_answers_are_cached_per_content(corpus, benchmarks) -> None:
    suite, pairs, task = benchmarks
    first = corpus_check.corpus_check(corpus, [suite, pairs])
    # Without its file the corpus cannot be read: what was checked is answered from the
    # cache, what was not says so.
    corpus.path.unlink()
    artifacts.delete(corpus.artifact_key)
    artifact_cache.forget(corpus.artifact_key)
    assert corpus_check.corpus_check(corpus, [suite, pairs]) == first
    again = corpus_check.corpus_check(corpus, [pairs, task])
    assert again["benchmarks"][0] == first["benchmarks"][1]
    assert again["benchmarks"][1]["found"] is None
    assert again["error"].startswith("the corpus file cannot be read")


def test_the_api_before_a_run(corpus, benchmarks, alice_client, anon_client) -> None:
    suite, pairs, task = benchmarks
    suite.tags.create(name="checked")
    address = "/api/corpora/mixed/overlap/"
    query = {"tags": ["checked"], "pair_sets": [pairs.name], "probing_tasks": [task.name]}
    response = alice_client.get(address, query)
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["corpus"] == "mixed" and body["found"] == 3
    assert [(r["kind"], r["name"], r["found"]) for r in body["benchmarks"]] == [
        ("suite", suite.name, 2),
        ("pairs", "pairs", 1),
        ("probing", "attractors", 1),
    ]
    # Named and tagged: checked and listed once.
    both = alice_client.get(address, {"suites": [suite.name], "tags": ["checked"]}).json()
    assert len(both["benchmarks"]) == 1
    refused = [
        ({"suites": ["nope"]}, "$.suites"),
        ({"tags": ["nope"]}, "$.tags"),
        ({"steps": "3"}, "$.steps"),
    ]
    for params, path in refused:
        response = alice_client.get(address, params)
        assert response.status_code == 400, params
        assert response.json()["errors"][0]["path"].startswith(path), response.json()
    unknown = alice_client.get(address, {"steps": "3"}).json()["errors"][0]["message"]
    assert unknown == "unknown parameter 'steps': give suites, pair_sets, probing_tasks or tags"
    assert alice_client.get("/api/corpora/nope/overlap/").status_code == 404
    assert anon_client.get(address, query).json() == body  # a read: anyone's


def test_the_run_page_and_api(corpus, benchmarks, alice, anon_client) -> None:
    suite, pairs, task = benchmarks
    run = services.training_request(
        corpus=corpus,
        name="checked",
        kind="causal",
        options={"preset": "tiny", "steps": 2},
        suites=[suite],
        pair_sets=[pairs],
        probing_tasks=[task],
        user=alice,
    )
    detail = anon_client.get(f"/api/training-runs/{run.pk}/").json()
    assert detail["corpus_check"]["found"] == 3
    assert [r["found"] for r in detail["corpus_check"]["benchmarks"]] == [2, 1, 1]
    page = anon_client.get(f"/training/{run.pk}/").content.decode()
    assert "3 of the 3 benchmarks have sentences in the corpus mixed" in page
    assert page.count('<tr class="overlap-found">') == 3
    assert "<q>the teachers are in the classroom</q>" in page


def test_the_example_corpus_holds_no_example_sentence(
    benchmarks, tmp_path, alice_client, anon_client
) -> None:
    """The run command's bootstrap imports the example corpus (and again changes
    nothing), the Training page offers it, and its sentences are the generator's own:
    none is one of the example benchmarks'."""
    assert "No corpus yet" in anon_client.get("/training/").content.decode()
    (step,) = [s for s in PREPARE if s[1] == "import_corpus"]
    for _ in range(2):
        call_command(*step[1:], stdout=io.StringIO())
    corpus = Corpus.objects.get()
    assert corpus.name == EXAMPLE_CORPUS and corpus.owner is None
    listed = alice_client.get("/training/").content.decode()
    assert (
        f'href="/training/new/?corpus={EXAMPLE_CORPUS}">Train a model on {EXAMPLE_CORPUS}' in listed
    )
    assert f'href="/corpora/{EXAMPLE_CORPUS}/"' in anon_client.get("/training/").content.decode()
    assert corpus.line_count == 5000 and corpus.bytes <= 400_000  # as docs/training.md says
    suites = [
        suite_import(source=path.read_text(), owner=None).suite
        for path in sorted(EXAMPLES.glob("*.json"))
        if path.name != "agreement_local.json"  # imported by `benchmarks`
    ]
    check = corpus_check.corpus_check(corpus, [*suites, *benchmarks])
    assert len(check["benchmarks"]) == 8 and check["found"] == 0, check
    # The file is the generator's: it writes it again byte for byte.
    script = REPO / "examples" / "corpora" / "make_example_corpus.py"
    again = tmp_path / "again.txt"
    subprocess.run([sys.executable, str(script), "--out", str(again)], check=True, cwd=REPO)
    assert again.read_bytes() == (REPO / "examples" / "corpora" / "example_corpus.txt").read_bytes()
