"""Registering models: local folders only under the model folders (GYM_MODEL_DIRS), hub
ids checked by syntax, one model per folder however it is written, no weights read by the
web process, no server paths in messages others read, a bounded worker model cache."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from evaluations import model_sources
from evaluations.language_models import registry as model_registry
from evaluations.models import LanguageModel
from evaluations.syntaxgym import services

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def gpt2_folder(tmp_path_factory) -> Path:
    from tests.tiny_models import make_gpt2

    return make_gpt2(tmp_path_factory.mktemp("source-gpt2"))


def _refusal(source: str) -> str:
    with pytest.raises(model_registry.ModelRegistrationError) as refused:
        model_registry.model_register(source=source, name="x")
    return refused.value.errors["source"]


def test_paths_outside_the_model_folders_are_refused_alike(model_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    database = str(django_settings.VAR_DIR / "db.sqlite3")
    messages = {
        source: _refusal(source)
        for source in (
            "/etc/shadow",
            "/etc/passwd",
            "/root",
            "/no/such/folder",
            database,
            str(outside),
            f"{model_dir}/../elsewhere",
            "~/",
        )
    }
    # One message for all: whether a path exists is not told.
    assert len(set(messages.values())) == 1, messages
    (message,) = set(messages.values())
    assert "under a model folder" in message and "GYM_MODEL_DIRS" in message
    assert LanguageModel.objects.count() == 0


def test_a_symlink_out_of_the_model_folder_is_refused(model_dir: Path, tmp_path: Path) -> None:
    outside = tmp_path / "secret"
    outside.mkdir()
    (outside / "config.json").write_text("{}")
    (model_dir / "innocent").symlink_to(outside)
    assert "under a model folder" in _refusal(str(model_dir / "innocent"))


def test_one_folder_under_two_spellings_is_one_model(model_dir: Path, gpt2_folder: Path) -> None:
    shutil.copytree(gpt2_folder, model_dir / "tiny")
    model = model_registry.model_register(source=str(model_dir / "tiny"), name="tiny")
    assert model.source == str((model_dir / "tiny").resolve())
    assert model.kind == "causal" and model.display_name == "tiny"
    (model_dir / "alias").symlink_to(model_dir / "tiny")
    for spelling in (f"{model_dir}/./tiny/", f"{model_dir}/sub/../tiny", str(model_dir / "alias")):
        with pytest.raises(model_registry.ModelRegistrationError) as again:
            model_registry.model_register(source=spelling, name="tiny-again")
        assert "already registered" in again.value.errors["source"]
    assert LanguageModel.objects.count() == 1


def test_inside_the_model_folder_missing_things_are_explained(model_dir: Path) -> None:
    assert "nothing named nope" in _refusal(str(model_dir / "nope"))
    (model_dir / "empty").mkdir()
    assert "no config.json" in _refusal(str(model_dir / "empty"))


def test_the_web_process_reads_no_weights(model_dir: Path, gpt2_folder: Path) -> None:
    folder = model_dir / "garbage-weights"
    shutil.copytree(gpt2_folder, folder)
    for weights in folder.glob("*.safetensors"):
        weights.write_bytes(os.urandom(1024))  # unreadable as weights
    # The config alone tells the kind: the broken weights were never opened.
    assert model_registry.model_register(source=str(folder), name="garbage").kind == "causal"
    # A single file is sniffed by its first bytes (n-gram formats) and never read whole:
    # a sparse 4 GB file is refused at once, without the memory to hold it.
    big = model_dir / "weights.bin"
    with big.open("wb") as out:
        out.truncate(4 * 1024**3)
    assert "not an n-gram model" in _refusal(str(big))
    # Nor is an oversized config.json.
    huge = model_dir / "huge-config"
    huge.mkdir()
    (huge / "config.json").write_text("{" + " " * (2 * 1024 * 1024) + "}")
    (huge / "tokenizer.json").write_text("{}")
    assert not model_sources.config_is_readable(
        model_sources.model_source_check(str(huge), model_dirs=[model_dir])
    )


@pytest.mark.parametrize("hub_id", ["gpt2", "EleutherAI/pythia-160m", "a/b.c_d-1", "x" * 96])
def test_hub_ids_of_the_right_shape_are_accepted(hub_id: str, model_dir: Path) -> None:
    checked = model_sources.model_source_check(hub_id, model_dirs=[model_dir], cwd=model_dir)
    assert checked == model_sources.ModelSource(source=hub_id, local=False)


@pytest.mark.parametrize(
    "hub_id", ["bad id", "-x", "x-", "a--b", "a..b", "é/x", "a/b;rm", "x" * 97, "a/" + "b" * 97]
)
def test_hub_ids_of_the_wrong_shape_are_refused(hub_id: str, model_dir: Path) -> None:
    with pytest.raises(model_sources.ModelSourceError, match="not a hub id"):
        model_sources.model_source_check(hub_id, model_dirs=[model_dir], cwd=model_dir)


def test_the_register_page_tells_nothing_about_server_paths(alice_client, model_dir) -> None:
    pages = []
    for source in ("/etc/passwd", "/etc/no-such-file"):
        response = alice_client.post_form("/models/register/", {"source": source, "name": "m"})
        assert response.status_code == 400
        text = response.content.decode().replace(source, "SOURCE")
        # The CSRF token differs per response; everything else must be the same.
        pages.append(re.sub(r'name="csrfmiddlewaretoken" value="[^"]+"', "", text))
    assert pages[0] == pages[1]


def test_failure_reasons_shown_to_others_hold_no_paths() -> None:
    reason = (
        "model folder '/srv/gym/var/models/tiny' could not be loaded: [Errno 2] No such "
        "file or directory: '/srv/gym/var/models/tiny/model.safetensors' (see "
        "https://huggingface.co/docs) C:\\models\\x"
    )
    public = model_sources.public_error(reason)
    assert "/srv" not in public and "C:\\" not in public
    assert "https://huggingface.co/docs" in public
    assert public.count("<path on the server>") == 3


def test_a_failed_run_stores_the_public_reason(alice, model_dir: Path) -> None:
    from suites.syntaxgym import services as suite_services
    from tests.conftest import small_suite, suite_evaluation

    suite = suite_services.suite_import(source=small_suite("s"), owner=alice).suite
    model = LanguageModel.objects.create(name="m", display_name="m", source="m")
    evaluation = suite_evaluation(model, suite)
    services.evaluation_fail(
        evaluation_id=evaluation.pk, attempt=1, reason="cannot open /home/admin/secret/model.bin"
    )
    evaluation.refresh_from_db()
    assert evaluation.status == "failed"
    assert evaluation.error == "cannot open <path on the server>"


def test_the_worker_keeps_a_bounded_number_of_models(tmp_path_factory) -> None:
    from evaluations.scoring import loading
    from tests.tiny_models import make_gpt2

    folders = [make_gpt2(tmp_path_factory.mktemp(f"lru-{i}")) for i in range(3)]
    loading.clear_model_cache()
    try:
        loading.set_max_loaded_models(2)
        for folder in folders:
            loading.load_model(str(folder), device="cpu")
        assert [key[0] for key in loading.loaded_model_keys()] == [str(f) for f in folders[1:]]
        # Using a model makes it the most recent: the other one goes first.
        loading.load_model(str(folders[1]), device="cpu")
        loading.load_model(str(folders[0]), device="cpu")
        assert [key[0] for key in loading.loaded_model_keys()] == [str(folders[1]), str(folders[0])]
        loading.set_max_loaded_models(1)
        assert [key[0] for key in loading.loaded_model_keys()] == [str(folders[0])]
    finally:
        loading.set_max_loaded_models(2)
        loading.clear_model_cache()


def test_a_trusted_caller_may_allow_another_folder(
    model_dir: Path, tmp_path: Path, gpt2_folder: Path
) -> None:
    shipped = tmp_path / "shipped"
    shutil.copytree(gpt2_folder, shipped / "tiny")
    assert "under a model folder" in _refusal(str(shipped / "tiny"))
    model = model_registry.model_register(
        source=str(shipped / "tiny"), name="shipped", extra_model_dirs=[shipped]
    )
    assert model.source == str((shipped / "tiny").resolve())


def test_pages_and_the_api_show_local_sources_without_server_folders(
    model_dir: Path, tmp_path: Path, gpt2_folder: Path, anon_client, dana_client
) -> None:
    shutil.copytree(gpt2_folder, model_dir / "tiny")
    inside = model_registry.model_register(source=str(model_dir / "tiny"), name="inside")
    shipped = tmp_path / "site-packages" / "pkg" / "model"
    shutil.copytree(gpt2_folder, shipped / "tiny")
    outside = model_registry.model_register(
        source=str(shipped / "tiny"), name="outside", extra_model_dirs=[shipped]
    )
    hub = LanguageModel.objects.create(name="hub", display_name="Hub", source="gpt2")
    assert inside.public_source == "models/tiny"
    assert outside.public_source == "…/model/tiny"
    assert hub.public_source == "gpt2"
    server_folder = str(tmp_path)
    for path in ("/models/", "/models/inside/", "/models/outside/", "/api/models/"):
        body = anon_client.get(path).content.decode()
        assert server_folder not in body, path
    assert "models/tiny" in anon_client.get("/models/inside/").content.decode()
    listed = {m["name"]: m["source"] for m in anon_client.get("/api/models/").json()["results"]}
    assert listed == {"inside": "models/tiny", "outside": "…/model/tiny", "hub": "gpt2"}
    # Staff may see where a model lies, to look after the server.
    assert str(inside.source) in dana_client.get("/models/inside/").content.decode()
