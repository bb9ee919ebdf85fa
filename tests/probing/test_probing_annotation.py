"""People label a task's te sentences without seeing the labels: the page, what is kept,
hostile answers (400, nothing kept), and human accuracy on the run page."""

from __future__ import annotations

import pytest

from evaluations.models import LanguageModel, ProbingAnnotation, ProbingRun
from evaluations.probing import selectors as probing_selectors
from suites.models import ProbingTask
from suites.probing.services import probing_task_import
from tests.conftest import SHARED_DATA, signed_in_client

pytestmark = pytest.mark.django_db
SMALL = "".join(
    f"{part}\t{label}\t{sentence}\n"
    for part, label, sentence in [
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
    assert probing_selectors.human_accuracy(task) == {
        "accuracy": 3 / 4, "answers": 4, "correct": 3, "people": 2, "sentences": 3
    }  # fmt: skip

    model = LanguageModel.objects.create(name="m", display_name="M", source="/tmp/m")
    run = ProbingRun.objects.create(
        model=model, task=task, content_hash=task.content_hash, status="done", best_layer=0,
        best_va=0.5, best_te=0.5, baselines={}, confusion={},
    )  # fmt: skip
    run_page = anon_client.get(f"/probing-runs/{run.pk}/").content.decode()
    assert '0.75</span><span class="label">human accuracy on te: 4 answers by 2 people' in run_page
    task_page = anon_client.get(f"/probing/{task.name}/").content.decode()
    assert "/probing/toy%20odd/annotate/" in task_page


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
