"""People label a task's te sentences without seeing the labels: the page, what is kept,
hostile answers (400, nothing kept), and the human baseline row (each annotator's accuracy,
the pooled accuracy with its interval, Cohen's or Fleiss' kappa) on the pages, the
leaderboard, the downloads and the API."""

from __future__ import annotations

import csv
import html
import io
import json

import pytest

from evaluations.models import LanguageModel, ProbingAnnotation, ProbingLayerResult, ProbingRun
from evaluations.probing import selectors as probing_selectors
from evaluations.statistics import wilson_interval
from suites.models import ProbingTask
from suites.probing.services import probing_task_import
from tests.conftest import SHARED_DATA, signed_in_client, tsv_lines

pytestmark = pytest.mark.django_db
SMALL = tsv_lines(
    [
        ("tr", "O", "the dog barks ."),
        ("tr", "C", "the dog sings the table ."),
        ("va", "O", "a cat sleeps ."),
        ("va", "C", "a cat drinks the sky ."),
        ("te", "O", "the bird flies ."),
        ("te", "C", "the bird eats a song ."),
        ("te", "O", "the horse runs ."),
    ]
)


@pytest.fixture
def task(alice) -> ProbingTask:
    return probing_task_import(source=SMALL, name="toy odd", owner=alice, task_type="custom")


def _answer(client, task: ProbingTask, instance: int | str, label: str):
    return client.post_form(
        f"/probing/{task.name}/annotate/", {"instance": str(instance), "label": label}
    )


def _wilson(successes: int, n: int) -> list[float]:
    interval = wilson_interval(successes, n)
    assert interval is not None
    return list(interval)


def _gold(task: ProbingTask) -> dict[int, str]:
    return dict(task.instances.values_list("pk", "label"))


def test_everyone_labels_the_same_te_sentences_and_accuracy_is_counted(
    task, alice, bob, anon_client
) -> None:
    sample = probing_selectors.annotation_sample(task)
    te = set(task.instances.filter(partition="te").values_list("pk", flat=True))
    assert set(sample) == te and sample == probing_selectors.annotation_sample(task)
    gold = _gold(task)
    wrong = {"O": "C", "C": "O"}

    alice_client = signed_in_client(alice)
    page = alice_client.get(f"/probing/{task.name}/annotate/").content.decode()
    first = task.instances.get(pk=sample[0])
    assert first.sentence in page and "0 of 3 answered" in page
    assert f'value="{first.label}"' in page  # a choice, never marked as the answer
    # alice: the first two right, the third wrong; the page moves on after each.
    for k, pk in enumerate(sample):
        label = gold[pk] if k < 2 else wrong[gold[pk]]
        response = _answer(alice_client, task, pk, label)
        assert response.status_code == 302
    done = alice_client.get(f"/probing/{task.name}/annotate/").content.decode()
    assert "You have answered every sentence" in done and "0.67 (2 of 3)" in done
    # Answering again replaces the answer.
    _answer(alice_client, task, sample[2], gold[sample[2]])
    assert probing_selectors.annotation_state(task, alice).correct == 3
    _answer(alice_client, task, sample[2], wrong[gold[sample[2]]])
    assert ProbingAnnotation.objects.filter(user=alice).count() == 3

    bob_client = signed_in_client(bob)
    _answer(bob_client, task, sample[0], gold[sample[0]])
    # Only people who answered every sentence count: bob is still labelling.
    human = probing_selectors.human_accuracy(task)
    assert human is not None
    assert (human["accuracy"], human["answers"], human["correct"]) == (2 / 3, 3, 2)
    assert (human["people"], human["labelling"], human["sentences"]) == (1, 1, 3)
    assert human["interval"] == _wilson(2, 3)
    assert human["annotators"] == [
        {"user": "alice", "accuracy": 2 / 3, "interval": _wilson(2, 3),
         "correct": 2, "answers": 3},
    ]  # fmt: skip
    assert human["agreement"] is None

    model = LanguageModel.objects.create(name="m", display_name="M", source="/tmp/m")
    run = ProbingRun.objects.create(
        model=model, task=task, content_hash=task.content_hash, status="done", best_layer=0,
        best_va=0.5, best_te=0.5, baselines={}, confusion={},
    )  # fmt: skip
    run_page = anon_client.get(f"/probing-runs/{run.pk}/").content.decode()
    low, high = _wilson(2, 3)
    assert (
        '0.67</span><span class="label">human accuracy on te: '
        f"<span data-interval>{low:.2f}–{high:.2f}</span> (95%), 3 answers by 1 person"
    ) in run_page
    assert "agreement: needs two people who finished" in run_page
    assert "1 still labelling, not counted yet" in run_page
    task_page = anon_client.get(f"/probing/{task.name}/").content.decode()
    assert "/probing/toy%20odd/annotate/" in task_page


# alice, bob and charlie's answers on the three te sentences of SMALL (gold O, C, O).
ANSWERS = {
    "the bird flies .": ("O", "C", "O"),
    "the bird eats a song .": ("C", "C", "C"),
    "the horse runs .": ("O", "O", "C"),
}


def _done_run(task: ProbingTask) -> ProbingRun:
    model = LanguageModel.objects.create(name="m", display_name="M", source="/tmp/m")
    run = ProbingRun.objects.create(
        model=model, task=task, content_hash=task.content_hash, status="done", best_layer=0,
        best_va=0.5, best_te=0.5, baselines={}, confusion={}, pooling="mean", probe="logreg",
    )  # fmt: skip
    ProbingLayerResult.objects.create(
        run=run, layer=0, va_accuracy=0.5, te_accuracy=0.5, hyperparameters={}
    )
    return run


def test_agreement_is_cohens_kappa_for_two_and_fleiss_for_three(
    task, alice, bob, charlie, anon_client
) -> None:
    by_sentence = dict(task.instances.filter(partition="te").values_list("sentence", "pk"))
    clients = [signed_in_client(person) for person in (alice, bob, charlie)]

    def label(k: int, last: int = 3) -> None:
        for sentence, labels in list(ANSWERS.items())[:last]:
            assert _answer(clients[k], task, by_sentence[sentence], labels[k]).status_code == 302

    label(0)
    label(1)
    label(2, last=1)  # charlie has answered one sentence
    # alice and bob: agree on 2 of 3 (p_o = 2/3); alice says O 2/3, C 1/3, bob O 1/3,
    # C 2/3: p_e = 2/9 + 2/9 = 4/9; Cohen's kappa = (2/3 - 4/9) / (5/9) = 0.4.
    human = probing_selectors.human_accuracy(task)
    assert human is not None and human["labelling"] == 1 and human["people"] == 2
    assert human["accuracy"] == 5 / 6
    assert human["agreement"]["kappa"] == pytest.approx(0.4, abs=1e-12)
    assert {k: v for k, v in human["agreement"].items() if k != "kappa"} == {
        "method": "cohen", "annotators": 2, "sentences": 3
    }  # fmt: skip
    # Still labelling, charlie sees nobody's numbers (nor, through kappa, their labels).
    page = clients[2].get(f"/probing/{task.name}/annotate/").content.decode()
    assert "Everyone who has finished" not in page and "κ" not in page

    label(2)
    # Three people: per sentence, the share of agreeing ordered pairs is 1/3, 1, 1/3,
    # P = 5/9; labels O 4 of 9, C 5 of 9: P_e = 41/81; Fleiss' kappa = (4/81) / (40/81).
    human = probing_selectors.human_accuracy(task)
    assert human is not None and human["labelling"] == 0 and human["people"] == 3
    assert human["accuracy"] == 7 / 9 and human["interval"] == _wilson(7, 9)
    assert [(a["user"], a["correct"]) for a in human["annotators"]] == [
        ("alice", 3), ("bob", 2), ("charlie", 2)
    ]  # fmt: skip
    agreement = human["agreement"]
    assert agreement["method"] == "fleiss" and agreement["sentences"] == 3
    assert agreement["kappa"] == pytest.approx(0.1, abs=1e-12)
    done = html.unescape(clients[2].get(f"/probing/{task.name}/annotate/").content.decode())
    assert "Everyone who has finished" in done
    assert "Fleiss' κ 0.10 over 3 sentences (3 people)" in done

    run = _done_run(task)
    low, high = _wilson(7, 9)
    run_page = html.unescape(anon_client.get(f"/probing-runs/{run.pk}/").content.decode())
    assert f"{low:.2f}–{high:.2f}</span> (95%), 9 answers by 3 people" in run_page
    assert "Fleiss' κ 0.10 over 3 sentences (3 people)" in run_page
    assert '<th scope="row">charlie</th><td class="num">0.67</td>' in run_page
    board = html.unescape(anon_client.get("/leaderboard/").content.decode())
    row = board.split('class="lb-baseline pb-baseline pb-human"')[1].split("</tr>")[0]
    assert "0.78" in row and f"{low:.2f}–{high:.2f}" in row and "κ 0.10" in row

    # The downloads and the API carry the same row.
    data = anon_client.get("/api/leaderboard/probing/").json()
    assert data["human"][task.name] == json.loads(json.dumps(human))
    rows = {
        r[0]: r
        for r in csv.reader(
            io.StringIO(anon_client.get("/leaderboard/probing.csv").content.decode())
        )
    }
    assert float(rows["baseline:human"][3]) == 7 / 9
    assert float(rows["human:interval_low"][3]) == low
    assert rows["human:people"][3] == "3" and rows["human:kappa_method"][3] == "fleiss"
    assert float(rows["human:kappa"][3]) == pytest.approx(0.1, abs=1e-12)
    assert rows["human:kappa_sentences"][3] == "3"
    document = json.loads(anon_client.get(f"/probing-runs/{run.pk}/results.json").content)
    assert document["human"] == json.loads(json.dumps(human))
    layer = next(
        csv.DictReader(
            io.StringIO(anon_client.get(f"/probing-runs/{run.pk}/layers.csv").content.decode())
        )
    )
    assert float(layer["human_te_accuracy"]) == 7 / 9 and layer["human_people"] == "3"
    assert layer["human_kappa_method"] == "fleiss" and layer["human_kappa_sentences"] == "3"
    api = anon_client.get(f"/api/probing-runs/{run.pk}/").json()
    assert api["human"]["agreement"]["method"] == "fleiss"


def test_agreement_over_the_sentences_everyone_labelled() -> None:
    gold = {1: "A", 2: "B", 3: "A"}

    def answers(user: int, labels: dict[int, str]) -> list[probing_selectors.Answer]:
        return [(user, f"u{user}", pk, label, gold[pk]) for pk, label in labels.items()]

    # Nobody has finished a sample of three: no row; no sample: no row.
    assert probing_selectors.human_summary(answers(1, {1: "A"}), 3) is None
    assert probing_selectors.human_summary([], 0) is None
    # Two people who answered all three; a third with one answer is left out.
    rows = answers(1, {1: "A", 2: "B", 3: "A"}) + answers(2, {1: "A", 2: "B", 3: "B"})
    human = probing_selectors.human_summary(rows + answers(3, {1: "B"}), 3)
    assert human is not None and human["people"] == 2 and human["labelling"] == 1
    # p_o = 2/3; u1 A 2/3, B 1/3; u2 A 1/3, B 2/3: p_e = 4/9, kappa = 0.4.
    assert human["agreement"]["kappa"] == pytest.approx(0.4, abs=1e-12)
    # agreement() itself: over the sentences all labelled; none with fewer than two
    # people or no sentence in common; None kappa where one label is given throughout.
    assert probing_selectors.agreement([{1: "A", 2: "B"}]) is None
    assert probing_selectors.agreement([{1: "A"}, {2: "A"}]) is None
    shared = probing_selectors.agreement([{1: "A", 2: "B", 3: "A"}, {2: "B", 3: "A"}])
    assert shared == {"kappa": 1.0, "method": "cohen", "annotators": 2, "sentences": 2}
    same = probing_selectors.agreement([{1: "A"}, {1: "A"}, {1: "A", 2: "B"}])
    assert same == {"kappa": None, "method": "fleiss", "annotators": 3, "sentences": 1}


def test_hostile_answers_are_400_and_keep_nothing(task, alice, anon_client) -> None:
    client = signed_in_client(alice)
    te = probing_selectors.annotation_sample(task)[0]
    tr = task.instances.filter(partition="tr").first().pk
    cases = [
        (te, "NOT A LABEL"),
        (te, ""),
        (te, "O\x00"),
        (tr, "O"),  # not a sentence of the sample
        ("abc", "O"),
        ("-1", "O"),
        ("99999999999999999999999", "O"),
        ("", "O"),
        ("\x00", "O"),
    ]
    for instance, label in cases:
        response = _answer(client, task, instance, label)
        assert response.status_code == 400, (instance, label)
        assert "Not saved" in response.content.decode()
    assert not ProbingAnnotation.objects.exists()
    assert client.get("/probing/no such task/annotate/").status_code == 404
    put = client.put(f"/probing/{task.name}/annotate/", HTTP_X_CSRFTOKEN=client.csrf_token())
    assert put.status_code == 405
    # Signed out: to the login page.
    response = anon_client.get(f"/probing/{task.name}/annotate/")
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_a_senteval_sample_asks_about_at_most_200_te_sentences(alice) -> None:
    source = SHARED_DATA / "senteval-probing" / "odd_man_out.txt"
    if not source.exists():
        pytest.skip(f"shared sample {source} is absent")
    task = probing_task_import(source=source, name="odd_man_out", owner=alice)
    sample = probing_selectors.annotation_sample(task)
    te = task.instances.filter(partition="te")
    assert te.count() == 191 and len(sample) == 191 and len(set(sample)) == 191
    assert sample != sorted(sample)  # asked in a shuffled order, the same for everyone
    state = probing_selectors.annotation_state(task, alice)
    assert state.next is not None and state.next.pk == sample[0] and state.accuracy is None
