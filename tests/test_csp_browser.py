"""The Content Security Policy in a real browser. Every browser test fails on a violation
(tests/browser.py); here one test visits a page of every kind, signed in, and checks the
exact policy on each answer, one visits the admin and the API docs, and one shows that the
policy bites: a script, a style attribute and an event handler slipped into a page as
the server sent it do nothing, and each is reported."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evaluations.models import ProbingRun
from evaluations.training import services as training_services
from suites.corpora.services import corpus_import
from suites.probing.services import probing_task_import
from tests.browser import login
from tests.minimal_pairs.test_minimal_pair_pages import make_set, store_run
from tests.probing.test_probing_board_spread import DATA, stored_run
from tests.syntaxgym.test_item_view import store, suite_data
from tests.test_csp import POLICY, directives

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def world(alice, settings, tmp_path: Path) -> dict[str, Any]:
    """One of each kind of thing a page shows: a suite with results, a minimal-pair set
    with a run, a probing task with a run (and its confusion matrix), a corpus and a
    training run on it (queued)."""
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    settings.GYM_TRAINING_DIR = tmp_path / "trained"
    evaluation = store(suite_data("agreement"))
    pair_run = store_run(evaluation.model, make_set("pairs", owner=alice))
    task = probing_task_import(source=DATA, name="toy", owner=alice, task_type="subj_number")
    probing = stored_run(task, "probed", seeds=1)
    ProbingRun.objects.filter(pk=probing.pk).update(
        confusion={"labels": ["NN", "NNS"], "matrix": [[3, 1], [0, 4]]}
    )
    text = tmp_path / "kids.txt"
    text.write_text("look at the doggy\nwhere is the ball\n" * 50)
    corpus = corpus_import(source=text, name="kids", owner=alice)
    training = training_services.training_request(
        corpus=corpus, name="kids-lm", kind="causal", options={"preset": "tiny", "steps": 12}
    )
    return {
        "suite": evaluation.suite.name,
        "evaluation": evaluation.pk,
        "model": evaluation.model.name,
        "pair_run": pair_run.pk,
        "probing": probing.pk,
        "training": training.pk,
    }


def page_paths(w: dict[str, Any]) -> list[str]:
    """A page of every kind: lists, details, results, forms, the editor, the docs."""
    return [
        "/",
        "/tags/",
        f"/suites/{w['suite']}/",
        f"/suites/{w['suite']}/grid/",
        "/editor/",
        "/upload/",
        f"/suites/{w['suite']}/compare/",
        "/evaluations/",
        "/evaluations/new/",
        f"/evaluations/{w['evaluation']}/",
        f"/evaluations/{w['evaluation']}/results/",
        f"/evaluations/{w['evaluation']}/items/1/",
        "/leaderboard/",
        "/runs/",
        "/models/",
        "/models/register/",
        f"/models/{w['model']}/",
        "/minimal-pairs/",
        "/minimal-pairs/pairs/",
        "/minimal-pairs/upload/",
        "/pairs/evaluations/",
        f"/pairs/evaluations/{w['pair_run']}/",
        "/probing/",
        "/probing/toy/",
        "/probing/toy/annotate/",
        "/probing-runs/",
        f"/probing-runs/{w['probing']}/",
        "/corpora/",
        "/corpora/kids/",
        "/corpora/upload/",
        "/training/",
        "/training/new/",
        f"/training/{w['training']}/",
        "/docs/",
        "/docs/ngram/",
        "/docs/search/?q=surprisal",
        "/no/such/page/",
    ]


# The cells coloured by a value (classes since the policy), and those left without colour.
COLOURED = """() => {
  const cells = [...document.querySelectorAll(".heat-bg, .shade-bg, .tok[class*=share-]")];
  const clear = cells.filter(c => getComputedStyle(c).backgroundColor === "rgba(0, 0, 0, 0)");
  return [cells.length, clear.length];
}"""


def test_every_kind_of_page_runs_under_the_policy(page, world, alice) -> None:
    login(page, "alice", "alice-pass-1234")
    coloured = 0
    for path in page_paths(world):
        # goto waits for the load event: the page's scripts have run by then, and the
        # teardown fails the test on anything the policy blocked.
        response = page.goto(path)
        assert response is not None
        assert response.status == (404 if path.startswith("/no/") else 200), path
        assert directives(response.headers["content-security-policy"]) == POLICY, path
        if path.endswith("/grid/") or path == "/editor/":
            page.wait_for_selector(".ed-grid .tabulator-row")
        cells, clear = page.evaluate(COLOURED)
        assert clear == 0, f"{path}: {clear} of {cells} cells lost their colour"
        coloured += cells
    assert coloured > 20


def test_the_api_docs_and_the_admin_run_under_it(page, dana) -> None:
    dana.is_superuser = True
    dana.save()
    response = page.goto("/api/docs/")
    assert response is not None
    assert directives(response.headers["content-security-policy"]) == POLICY | {
        "img-src": ["'self'", "data:"]
    }
    # Swagger UI started from its script file and drew the operations of the schema.
    page.wait_for_selector(".opblock-tag", timeout=30_000)
    page.locator(".opblock-summary").first.click()
    page.wait_for_selector(".opblock-body")
    page.goto("/admin/login/")
    page.get_by_label("Username").fill("dana")
    page.get_by_label("Password").fill("dana-pass-1234")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/admin/")
    for path in ("/admin/", "/admin/auth/user/", "/admin/auth/user/add/"):
        response = page.goto(path)
        assert response is not None and response.status == 200, path
        assert directives(response.headers["content-security-policy"]) == POLICY, path


# Put into the page between the server and the browser, under the server's own header: an
# inline script, a style attribute, an event handler, and a script file of the site's own
# (allowed) that tries to make code of a string.
INJECTED = (
    "<script>document.title = 'injected script ran';</script>"
    '<p id="styled" style="color: rgb(255, 0, 0)">styled</p>'
    '<img id="handler" src="/no-such-image.png" onerror="document.title = \'handler ran\'">'
    '<script src="/static/js/csp-probe.js"></script>'
)
PROBE = """
try { eval("1"); document.body.dataset.eval = "ran"; }
catch (error) { document.body.dataset.eval = error.name; }
"""


def test_the_policy_blocks_what_was_slipped_into_a_page(page, csp_violations) -> None:
    def inject(route: Any) -> None:
        response = route.fetch()
        body = response.text().replace("</main>", INJECTED + "</main>")
        route.fulfill(response=response, body=body)

    page.route("**/leaderboard/", inject)
    page.route(
        "**/static/js/csp-probe.js", lambda r: r.fulfill(body=PROBE, content_type="text/javascript")
    )
    response = page.goto("/leaderboard/")
    assert response is not None and "content-security-policy" in response.headers
    page.wait_for_selector("body[data-eval]", state="attached")
    page.wait_for_function("() => document.querySelector('#handler').complete")
    assert page.title() == "Leaderboard · Gym"
    assert page.locator("body").get_attribute("data-eval") == "EvalError"
    color = page.locator("#styled").evaluate("p => getComputedStyle(p).color")
    assert color != "rgb(255, 0, 0)"
    page.evaluate("() => true")  # the console lines of the above are in
    blocked = "\n".join(csp_violations)
    for what in (
        "script-src-elem blocked inline",
        "style-src-attr blocked inline",
        "script-src-attr blocked inline",
        "script-src blocked eval",
    ):
        assert f"violation: {what}" in blocked, blocked
    csp_violations.clear()  # provoked on purpose: they do not fail the test
