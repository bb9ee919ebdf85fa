"""Every form that queues runs refuses a model that cannot run as a field error of the
same form (400, what was picked kept, nothing queued), never a 500: a model registered
only for imported results on any form, an n-gram model on a probing form, a hidden
model anywhere. The forms list such models disabled, with the reason beside them."""

from __future__ import annotations

import re

import pytest

from evaluations.models import Evaluation, LanguageModel, PairEvaluation, ProbingRun
from suites.minimal_pairs import sets as pair_sets
from suites.probing.services import probing_task_import
from suites.syntaxgym import services as suite_services
from tests.conftest import BrowserClient, small_suite, tsv_lines

pytestmark = pytest.mark.django_db

PAIRS = "sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\ta b\n2\t1\tunexpected\tb a\n"
PROBING = tsv_lines(
    [
        ("tr", "A", "the dog barks ."),
        ("tr", "B", "the dogs bark ."),
        ("va", "A", "a dog sleeps ."),
        ("te", "B", "the cats sing ."),
    ]
)
IMPORTED_ERROR = (
    "big-lm: registered only for imported results (source &#x27;imported:&lt;name&gt;&#x27;), "
    "so no worker can load it."
)
NGRAM_ERROR = "tri: an n-gram model has no hidden states (no layers) to probe"
HIDDEN_ERROR = "Select a valid choice. secret is not one of the available choices."


@pytest.fixture
def world(alice) -> dict[str, str]:
    suite = suite_services.suite_import(source=small_suite("agreement"), owner=alice).suite
    pair_set = pair_sets.minimal_pair_set_import(data=PAIRS, name="pairs", owner=alice).pair_set
    task = probing_task_import(source=PROBING, name="number", owner=alice)
    LanguageModel.objects.create(name="gpt", display_name="GPT", source="org/gpt", kind="causal")
    LanguageModel.objects.create(name="big-lm", display_name="Big LM", source="imported:big-lm")
    LanguageModel.objects.create(name="tri", display_name="Tri", source="/m/t.arpa", kind="ngram")
    LanguageModel.objects.create(
        name="secret", display_name="Secret", source="org/secret", is_hidden=True
    )
    return {"suite": suite.name, "pair_set": pair_set.name, "task": task.name}


def _forms(world: dict[str, str]) -> dict[str, tuple[str, dict[str, str]]]:
    """Each run form's address and what it posts besides the models."""
    return {
        "suite evaluations": ("/evaluations/new/", {"suites": world["suite"]}),
        "minimal pairs": ("/pairs/evaluations/new/", {"pair_sets": world["pair_set"]}),
        "probing": (
            "/probing-runs/new/",
            {"task": world["task"], "pooling": "mean", "probe": "logreg"},
        ),
    }


def _option(page: str, value: str) -> str:
    """The <option> or checkbox <input> (with its label) of model `value`."""
    for pattern in (
        rf'<option value="{value}"[^>]*>[^<]*</option>',
        rf'<label[^>]*><input[^>]*value="{value}"[^>]*>[^<]*</label>',
    ):
        found = re.search(pattern, page)
        if found:
            return found.group(0)
    raise AssertionError(f"no choice of {value!r}")


def _no_runs() -> bool:
    return not (
        Evaluation.objects.exists()
        or PairEvaluation.objects.exists()
        or ProbingRun.objects.exists()
    )


def test_forms_list_unrunnable_models_disabled_with_the_reason(world, alice_client) -> None:
    pages = {
        "suite evaluations": "/evaluations/new/",
        "minimal pairs": "/pairs/evaluations/new/",
        "probing": "/probing-runs/new/",
        "set page": f"/minimal-pairs/{world['pair_set']}/",
        "task page": f"/probing/{world['task']}/",
    }
    for name, address in pages.items():
        response = alice_client.get(address)
        assert response.status_code == 200, name
        page = response.content.decode()
        imported = _option(page, "big-lm")
        assert "disabled" in imported and "Big LM (results imported, cannot run here)" in imported
        gpt = _option(page, "gpt")
        assert "disabled" not in gpt and "cannot run" not in gpt, name
        assert 'value="secret"' not in page, name
        ngram = _option(page, "tri")
        if address.startswith("/probing"):
            assert "disabled" in ngram and "Tri (n-gram: no layers to probe)" in ngram, name
        else:
            assert "disabled" not in ngram, name


@pytest.mark.parametrize(
    ("form", "model", "error"),
    [
        ("suite evaluations", "big-lm", IMPORTED_ERROR),
        ("minimal pairs", "big-lm", IMPORTED_ERROR),
        ("probing", "big-lm", IMPORTED_ERROR),
        ("probing", "tri", NGRAM_ERROR),
        ("suite evaluations", "secret", HIDDEN_ERROR),
        ("minimal pairs", "secret", HIDDEN_ERROR),
        ("probing", "secret", HIDDEN_ERROR),
    ],
)
def test_a_crafted_choice_is_a_field_error_with_the_choice_kept(
    world, alice_client, form: str, model: str, error: str
) -> None:
    address, rest = _forms(world)[form]
    # With a runnable model beside it: the form refuses the whole request.
    response = alice_client.post(
        address,
        {**rest, "models": [model, "gpt"], "csrfmiddlewaretoken": alice_client.csrf_token()},
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert error in page
    assert 'class="errorlist"' in page
    # What was picked stays picked (a model that cannot run: picked and disabled).
    assert "checked" in _option(page, "gpt") or "selected" in _option(page, "gpt")
    if model != "secret":
        picked = _option(page, model)
        assert "disabled" in picked and ("checked" in picked or "selected" in picked)
    assert _no_runs()


def test_embedded_forms_post_to_the_same_refusal(world, alice_client) -> None:
    # The set page's and the task page's forms post these fields to the full forms.
    pair = alice_client.post_form(
        "/pairs/evaluations/new/", {"pair_sets": world["pair_set"], "models": "big-lm"}
    )
    assert pair.status_code == 400 and IMPORTED_ERROR in pair.content.decode()
    probe = alice_client.post_form(
        "/probing-runs/new/",
        {"task": world["task"], "models": "big-lm", "pooling": "last", "probe": "mlp"},
    )
    assert probe.status_code == 400 and IMPORTED_ERROR in probe.content.decode()
    # The old single-model name of the suite form (result pages' "run it again" button).
    suite = alice_client.post_form(
        "/evaluations/new/", {"model": "big-lm", "suites": world["suite"]}
    )
    assert suite.status_code == 400 and IMPORTED_ERROR in suite.content.decode()
    assert _no_runs()


def test_a_prefilled_link_to_an_imported_model_shows_it_disabled(world, alice_client) -> None:
    for address in ("/evaluations/new/", "/pairs/evaluations/new/", "/probing-runs/new/"):
        response = alice_client.get(address, {"model": "big-lm"})
        assert response.status_code == 200
        assert "disabled" in _option(response.content.decode(), "big-lm")


def test_rerun_outdated_and_model_page_leave_imported_models_out(world, alice_client) -> None:
    page = alice_client.get("/models/big-lm/").content.decode()
    assert "Results imported, cannot run here" in page
    assert "/evaluations/new/?model=big-lm" not in page
    response = alice_client.post_form("/evaluations/rerun-outdated/", {"model": "big-lm"})
    assert response.status_code == 302
    assert _no_runs()


def test_the_leaderboard_offers_no_queue_link_for_an_imported_model(world, alice) -> None:
    scored = pair_sets.minimal_pair_set_import(data=PAIRS, name="scored", owner=alice).pair_set
    for model in LanguageModel.objects.filter(name__in=["big-lm", "gpt"]):
        PairEvaluation.objects.create(
            model=model,
            pair_set=scored,
            content_hash=scored.content_hash,
            status="done",
            accuracy=0.5,
        )
    board = BrowserClient().get("/leaderboard/").content.decode()
    # Both have a result on one set and none on the other ("pairs").
    assert "/pairs/evaluations/new/?model=gpt&amp;pair_set=pairs" in board
    assert "/pairs/evaluations/new/?model=big-lm" not in board
    assert "No result for Big LM on pairs (results imported, cannot run here)" in board
