"""Model registration checks at once what can be checked cheaply (a local folder exists
under the model folders and holds a config and tokenizer files, a file is an n-gram model
of a known kind, a hub id is well-formed), with a specific message each, and never waits
on the network: no hub call in the request."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evaluations.models import LanguageModel
from tests.conftest import token_client
from tests.scoring.test_ngram import TINY_ARPA

pytestmark = pytest.mark.django_db

GPT2_CONFIG = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"]}


@pytest.fixture
def no_hub(monkeypatch) -> list[str]:
    """Counts every attempt to read a config from the hub (there must be none)."""
    import transformers

    calls: list[str] = []
    original = transformers.AutoConfig.from_pretrained

    def counted(source, *args, **kwargs):
        if not kwargs.get("local_files_only") and not Path(str(source)).exists():
            calls.append(str(source))
        return original(source, *args, **kwargs)

    monkeypatch.setattr(transformers.AutoConfig, "from_pretrained", counted)
    return calls


def _folder(root: Path, name: str, *files: str, config: dict | None = None) -> Path:
    folder = root / name
    folder.mkdir()
    if config is not None:
        (folder / "config.json").write_text(json.dumps(config))
    for file in files:
        (folder / file).write_text("{}")
    return folder


def _register(client, source: str, name: str = "m") -> tuple[int, str]:
    response = client.post_form("/models/register/", {"source": source, "name": name})
    return response.status_code, response.content.decode()


def test_a_local_folder_needs_a_config_and_tokenizer_files(alice_client, model_dir, no_hub) -> None:
    status, page = _register(alice_client, str(model_dir / "absent"))
    assert status == 400 and "nothing named absent in the model folder" in page
    no_config = _folder(model_dir, "no-config", "tokenizer.json")
    status, page = _register(alice_client, str(no_config))
    assert status == 400 and "that folder holds no config.json" in page
    no_tokenizer = _folder(model_dir, "no-tokenizer", config=GPT2_CONFIG)
    status, page = _register(alice_client, str(no_tokenizer))
    assert status == 400 and "holds a config.json but no tokenizer files" in page
    assert "tokenizer.save_pretrained" in page
    # GPT-2's own files (vocab.json with merges.txt) are a tokenizer as much as tokenizer.json.
    complete = _folder(model_dir, "complete", "vocab.json", "merges.txt", config=GPT2_CONFIG)
    status, _page = _register(alice_client, str(complete), name="complete")
    assert status == 302
    assert LanguageModel.objects.get(name="complete").kind == "causal"
    assert LanguageModel.objects.count() == 1 and no_hub == []


def test_a_file_must_be_an_ngram_model_of_a_known_kind(alice_client, model_dir) -> None:
    arpa = model_dir / "tiny.arpa"
    arpa.write_text(TINY_ARPA, encoding="utf-8")
    assert _register(alice_client, str(arpa), name="tri")[0] == 302
    assert LanguageModel.objects.get(name="tri").kind == "ngram"
    junk = model_dir / "notes.txt"
    junk.write_text("not a language model\n")
    status, page = _register(alice_client, str(junk))
    assert status == 400 and "is a file but not an n-gram model Gym can read" in page


def test_hub_ids_are_checked_by_shape_and_never_fetched(alice_client, model_dir, no_hub) -> None:
    for bad in ("bad id", "org/-name", "a--b", "x" * 97):
        status, page = _register(alice_client, bad)
        assert status == 400 and "is not a hub id" in page, bad
    assert _register(alice_client, "some-org/some-model.v2", name="hubbed")[0] == 302
    model = LanguageModel.objects.get(name="hubbed")
    # The worker learns the kind on its first load; the page did not ask the hub.
    assert model.kind == "unknown" and no_hub == []


def test_the_api_applies_the_same_checks(alice, model_dir, no_hub) -> None:
    client = token_client(alice)
    no_tokenizer = _folder(model_dir, "no-tokenizer", config=GPT2_CONFIG)
    refused = client.post(
        "/api/models/", {"source": str(no_tokenizer)}, content_type="application/json"
    )
    assert refused.status_code == 400
    (error,) = refused.json()["errors"]
    assert error["path"] == "$.source" and "no tokenizer files" in error["message"]
    # The answer names no server folder (only the model folder's own name).
    assert str(model_dir.parent) not in error["message"]
    accepted = client.post(
        "/api/models/", {"source": "EleutherAI/pythia-14m"}, content_type="application/json"
    )
    assert accepted.status_code == 201 and accepted.json()["kind"] == "unknown"
    assert no_hub == []


def test_a_name_too_long_for_the_file_system_is_refused_not_a_500(alice, model_dir, no_hub) -> None:
    # Found by the schema test: checking such a name as a path raised ENAMETOOLONG.
    client = token_client(alice)
    for source, message in (
        ("0" * 300, "is not a hub id"),
        (str(model_dir / ("a" * 300)), f"nothing named {'a' * 300} in the model folder"),
    ):
        response = client.post("/api/models/", {"source": source}, content_type="application/json")
        assert response.status_code == 400, response.content
        (error,) = response.json()["errors"]
        assert error["path"] == "$.source" and message in error["message"]
    assert LanguageModel.objects.count() == 0 and no_hub == []
