"""Shared fixtures: named users (alice owns, bob is another user, charlie has no rights,
dana is staff), clients that enforce CSRF like a browser, and the path to the real suites
in shared/."""

from __future__ import annotations

import contextlib
import functools
import math
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver

if TYPE_CHECKING:
    # Not at import: the scoring engine imports torch, which most tests never need.
    from torch import Tensor

    from evaluations.models import Evaluation, LanguageModel
    from evaluations.scoring import LoadedModel
    from evaluations.scoring.ngram import NgramModel
    from suites.models import Suite

# Browser fixtures, registered once for every module: the session's one Playwright and
# chromium must not be started again by a second module.
from tests.browser import browser, browser_context, csp_violations, page  # noqa: F401
from tests.celery_harness import pace, redis_broker, workers  # noqa: F401

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("GYM_SHARED_DATA", REPO.parent / "shared" / "data"))
EXAMPLES = REPO / "examples"


def search(pattern: str, text: str, flags: int = 0) -> re.Match[str]:
    """re.search for a test: nothing found fails the test there."""
    match = re.search(pattern, text, flags)
    assert match is not None, f"{pattern!r} not found"
    return match


def known(value: float | None) -> float:
    """A value the test expects to be there (None fails the test there)."""
    assert value is not None
    return value


def known_int(value: int | None) -> int:
    """As `known`, for a whole number."""
    assert value is not None
    return value


def neural_model(source: str, **options: Any) -> LoadedModel:
    """load_model for a transformers model (an n-gram model fails the test)."""
    from evaluations.scoring import LoadedModel, load_model

    model = load_model(source, **options)
    assert isinstance(model, LoadedModel), source
    return model


def ngram_model(source: str, **options: Any) -> NgramModel:
    """load_model for an n-gram model (a transformers model fails the test)."""
    from evaluations.scoring import load_model
    from evaluations.scoring.ngram import NgramModel

    model = load_model(source, **options)
    assert isinstance(model, NgramModel), source
    return model


def word_l2r_by_hand(
    forward: Callable[[Tensor], Any],
    ids: list[int],
    words: Sequence[int | None],
    mask_id: int | None,
) -> list[float]:
    """Word-aware left-to-right PLL surprisals (bits) of a masked model's `ids` between its
    first and last special token, one forward pass a token: the token and the later tokens
    of its own word (`words`: a word index a token) masked."""
    import torch

    assert mask_id is not None
    surprisals = []
    for position in range(1, len(ids) - 1):
        copy = list(ids)
        for other in range(position, len(ids) - 1):
            if other == position or words[other] == words[position]:
                copy[other] = mask_id
        with torch.inference_mode():
            logits = forward(torch.tensor([copy])).logits[0, position].double()
        surprisals.append(-float(logits.log_softmax(-1)[ids[position]]) / math.log(2.0))
    return surprisals


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """torch on one thread inside the block: tiny matrices gain nothing from threads, and
    on a shared machine a second thread only adds contention (torch is imported here, not
    at import: most tests never need it)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def manage(
    env: dict[str, str], *args: str, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    """`manage.py *args` run in a separate process from the repository with the environment
    `env` (nothing else of this process's): its exit status and output, as text."""
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def shared_files(*parts: str) -> list[Path]:
    """The real suites in shared/data (recursively); empty when the folder is absent,
    which CI does not allow."""
    folder = SHARED_DATA.joinpath(*parts)
    if not folder.is_dir():
        if os.environ.get("CI"):
            raise RuntimeError(f"CI needs the shared data at {folder}")
        return []
    # The JSON Schema file that sits beside the suites is not a suite.
    return sorted(
        p for p in folder.rglob("*.json") if p.is_file() and not p.name.startswith("schema")
    )


class BrowserClient(Client):
    """A test client that enforces CSRF; `post_form` sends the token as a browser would."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(enforce_csrf_checks=True, **kwargs)

    def csrf_token(self) -> str:
        if "csrftoken" not in self.cookies:
            self.get("/accounts/login/")
        return self.cookies["csrftoken"].value

    def send_json(self, method: str, path: str, body: str | bytes):
        """A JSON request with the CSRF header, as the pages' scripts send it."""
        send = getattr(self, method.lower())
        return send(path, body, content_type="application/json", HTTP_X_CSRFTOKEN=self.csrf_token())

    def post_form(self, path: str, data: dict[str, Any] | None = None, **kwargs: Any):
        payload = dict(data or {})
        payload["csrfmiddlewaretoken"] = self.csrf_token()
        return self.post(path, payload, **kwargs)


# The tiny models of tests/tiny_models.py, each built once a session (torch is imported
# only by the tests that ask for one).


@pytest.fixture(scope="session")
def tiny_gpt2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import make_gpt2

    return make_gpt2(tmp_path_factory.mktemp("tiny-gpt2"))


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import make_llama

    return make_llama(tmp_path_factory.mktemp("tiny-llama"))


@pytest.fixture(scope="session")
def tiny_bert(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from tests.tiny_models import make_bert

    return make_bert(tmp_path_factory.mktemp("tiny-bert"))


@functools.cache
def hashed_password(password: str) -> str:
    """`password` hashed by the site's own hasher (PBKDF2), once per test process: a
    hash costs a third of a second of CPU by design, and the tests make hundreds of
    users with the same few passwords. Signing in with it checks it as the site does."""
    from django.contrib.auth.hashers import make_password

    return make_password(password)


def make_user(username: str, password: str, **fields: Any) -> Any:
    """A user whose password is `password`, as create_user would make it."""
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create(
        username=username, password=hashed_password(password), **fields
    )


@pytest.fixture
def alice(db):
    return make_user("alice", "alice-pass-1234")


@pytest.fixture
def bob(db):
    return make_user("bob", "bob-pass-1234")


@pytest.fixture
def charlie(db):
    return make_user("charlie", "charlie-pass-1234")


@pytest.fixture
def dana(db):
    return make_user("dana", "dana-pass-1234", is_staff=True)


@pytest.fixture
def anon_client() -> BrowserClient:
    return BrowserClient()


def signed_in_client(user) -> BrowserClient:
    """A browser-like client (CSRF enforced) signed in as `user` (a session)."""
    client = BrowserClient()
    client.force_login(user)
    return client


def token_client(user) -> BrowserClient:
    """An API client that sends `user`'s token (`Authorization: Token <key>`), as a
    script would; no session, so no CSRF either."""
    from rest_framework.authtoken.models import Token

    token, _ = Token.objects.get_or_create(user=user)
    return BrowserClient(HTTP_AUTHORIZATION=f"Token {token.key}")


@pytest.fixture
def alice_client(alice) -> BrowserClient:
    return signed_in_client(alice)


@pytest.fixture
def bob_client(bob) -> BrowserClient:
    return signed_in_client(bob)


@pytest.fixture
def charlie_client(charlie) -> BrowserClient:
    return signed_in_client(charlie)


@pytest.fixture
def dana_client(dana) -> BrowserClient:
    return signed_in_client(dana)


def url_patterns() -> Iterator[tuple[str, URLPattern]]:
    """(route, pattern) for every URL of the site, e.g. ('api/suites/<str:name>/', ...)."""

    def walk(resolver: URLResolver, prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for entry in resolver.url_patterns:
            route = prefix + str(entry.pattern)
            if isinstance(entry, URLResolver):
                yield from walk(entry, route)
            else:
                yield route, entry

    return walk(get_resolver(), "")


def suite_evaluation(model: LanguageModel, suite: Suite, **fields: Any) -> Evaluation:
    """An evaluation of `model` on the current `suite`, its snapshot taken as a request
    takes it; `fields` are the rest of the row (status, accuracy, requested_by, ...)."""
    from evaluations.syntaxgym.services import evaluation_create
    from suites.syntaxgym.selectors import suite_canonical

    return evaluation_create(
        model=model,
        suite=suite,
        content_hash=suite.content_hash,
        snapshot=suite_canonical(suite),
        **fields,
    )


def running_evaluation(model: LanguageModel, suite: Suite) -> Evaluation:
    """An evaluation of `model` on `suite` as a worker finds it: the suite's snapshot taken
    (as a request takes it), and running."""
    from evaluations.models import Evaluation

    return suite_evaluation(model, suite, status=Evaluation.Status.RUNNING)


def store_sentences(evaluation: Evaluation, sentences: list[dict[str, Any]]) -> Evaluation:
    """`evaluation` (attempt 1) after the real store service took the worker's `sentences`,
    as the store task does: done."""
    from evaluations.syntaxgym import services

    assert services.results_store(
        evaluation_id=evaluation.pk, attempt=1, results={"sentences": sentences}
    )
    evaluation.refresh_from_db()
    assert evaluation.status == "done"
    return evaluation


def tsv_lines(rows: Iterable[Sequence[str]]) -> str:
    """`rows` as tab-separated lines, each ending in a newline: a probing task's file
    written row by row (partition, label, sentence; SentEval's subj_number puts the
    subject's form before the sentence)."""
    return "".join("\t".join(row) + "\n" for row in rows)


def suite_document(
    name: str,
    items: dict[int, dict[str, list[str]]],
    formulas: Sequence[str],
    *,
    region_names: Sequence[str] = ("Subject", "Verb", "End"),
    **meta: Any,
) -> dict[str, Any]:
    """A suite in the current format: `items` maps each item number to its conditions and
    each condition to its regions' contents (numbered from 1, named `region_names`), one
    formula prediction a formula, and `meta` besides the name and the metric "sum"."""
    return {
        "meta": {"name": name, "metric": "sum", **meta},
        "region_meta": {str(number): region for number, region in enumerate(region_names, 1)},
        "predictions": [{"type": "formula", "formula": formula} for formula in formulas],
        "items": [
            {
                "item_number": n,
                "conditions": [
                    {
                        "condition_name": condition,
                        "regions": [
                            {"region_number": number, "content": content}
                            for number, content in enumerate(contents, 1)
                        ],
                    }
                    for condition, contents in conditions.items()
                ],
            }
            for n, conditions in items.items()
        ],
    }


def agreement_item(subject: str, end: str = "here.") -> dict[str, list[str]]:
    """An item's conditions "match" (`subject` is `end`) and "mismatch" (`subject` are
    `end`), for suite_document."""
    return {"match": [subject, "is", end], "mismatch": [subject, "are", end]}


def small_suite(name: str = "tiny agreement", **meta: Any) -> dict[str, Any]:
    """A valid 2-item, 2-condition, 3-region suite in the current format."""
    items = {1: agreement_item("The dog"), 2: agreement_item("The cat")}
    return suite_document(name, items, ["(2;%mismatch%) > (2;%match%)"], **meta)


# Tests that take longest go first: run in several processes (scripts/test.sh), they
# start at once and the short ones fill the other processes around them, instead of a
# fault test of minutes starting last and keeping one process busy alone at the end.
_FIRST_MARKS = ("slow", "integration", "browser")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        for place, mark in enumerate(_FIRST_MARKS):
            if item.get_closest_marker(mark) is not None:
                return place
        return len(_FIRST_MARKS)

    items.sort(key=rank)


@pytest.fixture(autouse=True, scope="session")
def _private_broker():
    """Tests that queue work without a worker publish into kombu's in-memory broker,
    never into the developer's embedded broker. Yields a function that counts the
    messages waiting in a queue."""
    from gym.celery import app as celery_app
    from tests.celery_harness import _switch

    before = (celery_app.conf.broker_url, dict(celery_app.conf.broker_transport_options or {}))
    _switch("memory://", {})

    def waiting(queue: str) -> int:
        with celery_app.connection_for_write() as connection:
            # The channel's private queue size; celery-types leaves out default_channel.
            return connection.default_channel._size(queue)  # type: ignore[attr-defined]

    yield waiting
    _switch(*before)


@pytest.fixture(autouse=True, scope="session")
def _private_artifact_store(tmp_path_factory):
    """The artifact store (a local folder) and the artifact cache of this test process, in
    its temporary folder rather than the checkout's var/: set in the settings and in the
    environment, which the workers the tests start inherit."""
    from django.test import override_settings

    from gym import artifacts

    base = tmp_path_factory.getbasetemp()
    store, cache = base / "artifact-store", base / "artifact-cache"
    options = artifacts.artifact_storage("", store, endpoint="", region="us-east-1")
    saved = {key: os.environ.get(key) for key in ("GYM_ARTIFACTS_DIR", "GYM_ARTIFACT_CACHE_DIR")}
    os.environ.update(GYM_ARTIFACTS_DIR=str(store), GYM_ARTIFACT_CACHE_DIR=str(cache))
    from django.conf import settings

    override = override_settings(
        STORAGES={**settings.STORAGES, "artifacts": options},
        GYM_ARTIFACTS_DIR=store,
        GYM_ARTIFACT_CACHE_DIR=cache,
    )
    override.enable()
    yield store
    override.disable()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.fixture(autouse=True)
def _fresh_counters():
    """Throttle and failed-log-in counters live in the cache: each test starts at zero,
    so that no test is throttled because of the requests of the tests before it."""
    from django.core.cache import cache

    cache.clear()
    yield


@pytest.fixture(autouse=True)
def _temporary_model_dirs(settings, tmp_path_factory):
    """Tests build tiny models in temporary folders: those count as model folders
    (GYM_MODEL_DIRS), as var/models does on a real site. Uploaded models go to one of
    them too, never to the checkout's var/."""
    base = tmp_path_factory.getbasetemp()
    settings.GYM_MODEL_DIRS = [*settings.GYM_MODEL_DIRS, base]
    settings.GYM_UPLOADED_MODELS_DIR = str(base / "uploaded-models")
    yield


@pytest.fixture
def model_dir(settings, tmp_path: Path) -> Path:
    """The site's only model folder in this test (temporary folders elsewhere are not)."""
    folder = tmp_path / "models"
    folder.mkdir()
    settings.GYM_MODEL_DIRS = [folder]
    return folder
