"""A worker's cache of the artifact store (gym/artifact_cache.py): fetched once, checked by
hash, bounded with the least recently used removed first, never removed while in use, and
safe when two processes fetch the same key at once."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from gym import artifact_cache, artifacts

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store_and_cache(any_store: str, tmp_path: Path):
    """A local-folder store, then SeaweedFS's S3 (tests/artifacts/conftest.py), with a
    cache of 10,000 bytes."""
    with override_settings(
        GYM_ARTIFACT_CACHE_DIR=tmp_path / "cache", GYM_ARTIFACT_CACHE_BYTES=10_000
    ):
        artifact_cache.FETCHES.clear()
        yield tmp_path


def _model_folder(where: Path, weights: bytes) -> Path:
    (where / "sub").mkdir(parents=True)
    (where / "config.json").write_text('{"model_type": "gpt2"}')
    (where / "sub" / "model.safetensors").write_bytes(weights)
    return where


def test_file_fetched_once_and_checked(store_and_cache: Path) -> None:
    stored = artifacts.put_content(io.BytesIO(b"the dog barks\n" * 100), "corpora")
    first = artifact_cache.fetch_file(stored.key, sha256=stored.sha256)
    second = artifact_cache.fetch_file(stored.key, sha256=stored.sha256)
    assert first == second and first.read_bytes() == b"the dog barks\n" * 100
    assert str(first).startswith(str(store_and_cache / "cache"))
    assert artifact_cache.FETCHES == {stored.key: 1}


def test_wrong_hash_refused_and_nothing_kept(store_and_cache: Path) -> None:
    stored = artifacts.put_file("corpora/x", io.BytesIO(b"text\n"))
    with pytest.raises(artifact_cache.CorruptArtifact, match="SHA-256"):
        artifact_cache.fetch_file(stored.key, sha256="0" * 64)
    assert artifact_cache.cache_report()["entries"] == 0
    assert list((store_and_cache / "cache" / "tmp").iterdir()) == []
    # the right hash then fetches it
    assert artifact_cache.fetch_file(stored.key, sha256=stored.sha256).read_bytes() == b"text\n"


def _damage(key: str, data: bytes) -> None:
    """Replace a stored object's bytes behind Gym's back (a disk fault, a hand edit), in
    whichever store this test runs on."""
    from django.core.files.base import ContentFile
    from django.core.files.storage import storages

    storage = storages["artifacts"]
    storage.delete(key)
    assert storage.save(key, ContentFile(data)) == key


def _nothing_cached(root: Path) -> None:
    assert artifact_cache.cache_report()["entries"] == 0
    assert list((root / "cache" / "tmp").iterdir()) == []


def test_a_damaged_content_key_is_refused_without_a_hash_given(store_and_cache: Path) -> None:
    # The corpus's key names its hash: no caller has to pass it for it to be checked.
    stored = artifacts.put_content(io.BytesIO(b"the dog barks\n" * 100), "corpora")
    _damage(stored.key, b"the dog bites\n" * 100)
    with pytest.raises(artifact_cache.CorruptArtifact) as refused:
        artifact_cache.fetch_file(stored.key)
    assert f"The stored object {stored.key} is damaged" in str(refused.value)
    _nothing_cached(store_and_cache)


@pytest.mark.parametrize("damage", ["bytes", "record"])
def test_a_damaged_single_file_is_refused_by_its_recorded_hash(
    store_and_cache: Path, damage: str
) -> None:
    # A training state, a run's inputs, an ARPA model: keys that do not name their hash.
    key = "trained/run-1-2/states/checkpoint-64/training_state.pt"
    stored = artifacts.put_file(key, io.BytesIO(b"state" * 300), record_hash=True)
    assert artifacts.exists(key + artifacts.HASH_SUFFIX)
    if damage == "bytes":
        _damage(key, b"STATE" * 300)
    else:
        _damage(key + artifacts.HASH_SUFFIX, b"{not json")
    with pytest.raises(artifact_cache.CorruptArtifact, match=f"The stored object {key} is damaged"):
        artifact_cache.fetch_file(key)
    _nothing_cached(store_and_cache)
    # Stored again, whole: it arrives, checked.
    artifacts.put_file(key, io.BytesIO(b"state" * 300), record_hash=True)
    assert artifact_cache.fetch_file(key).read_bytes() == b"state" * 300
    assert artifacts.sha256_of(artifact_cache.fetch_file(key))[0] == stored.sha256


def test_a_file_cut_short_is_refused_by_its_recorded_size(store_and_cache: Path) -> None:
    key = "trained/run-1-2/inputs.json"
    artifacts.put_file(key, io.BytesIO(b'{"corpus": "x"}'), record_hash=True)
    _damage(key, b'{"corpus"')
    with pytest.raises(artifact_cache.CorruptArtifact, match=key):
        artifact_cache.fetch_file(key)
    _nothing_cached(store_and_cache)


def test_folder_checked_against_manifest(store_and_cache: Path) -> None:
    folder = _model_folder(store_and_cache / "model", b"\1" * 500)
    artifacts.put_folder("models/m1", folder)
    cached = artifact_cache.fetch_folder("models/m1")
    assert (cached / "sub" / "model.safetensors").read_bytes() == b"\1" * 500
    assert json.loads((cached / "config.json").read_text()) == {"model_type": "gpt2"}
    # a file changed in the store behind the manifest's back is caught on arrival
    artifacts.put_file("models/m2/files/config.json", io.BytesIO(b"{}"))
    artifacts.put_file(
        "models/m2/manifest.json",
        io.BytesIO(
            json.dumps({"files": [{"path": "config.json", "sha256": "f" * 64, "size": 2}]}).encode()
        ),
    )
    with pytest.raises(artifact_cache.CorruptArtifact, match="models/m2/files/config.json"):
        artifact_cache.fetch_folder("models/m2")


def test_least_recently_used_removed_first(store_and_cache: Path) -> None:
    keys = [artifacts.put_file(f"blobs/{n}", io.BytesIO(bytes([n]) * 4000)).key for n in range(3)]
    a = artifact_cache.fetch_file(keys[0])
    b = artifact_cache.fetch_file(keys[1])
    os.utime(a.parent, (1, 1))  # a used long ago, b more recently
    os.utime(b.parent, (2, 2))
    artifact_cache.fetch_file(keys[0])  # a used again: now b is the oldest
    artifact_cache.fetch_file(keys[2])  # 12,000 bytes > 10,000: one must go
    assert a.exists() and not b.exists()
    assert artifact_cache.cache_report()["bytes"] == 8000


def test_entry_in_use_is_kept(store_and_cache: Path) -> None:
    keys = [artifacts.put_file(f"blobs/{n}", io.BytesIO(bytes([n]) * 6000)).key for n in range(2)]
    with artifact_cache.using(keys[0]) as held:
        os.utime(held.parent, (1, 1))
        artifact_cache.fetch_file(keys[1])  # over the bound, but the older one is in use
        assert held.exists()
    assert artifact_cache.cache_report()["bytes"] == 12000
    artifact_cache.evict()
    assert not held.exists()  # no longer in use: the older entry goes


def test_larger_than_the_bound_is_kept(store_and_cache: Path) -> None:
    key = artifacts.put_file("blobs/big", io.BytesIO(b"x" * 20_000)).key
    assert artifact_cache.fetch_file(key).stat().st_size == 20_000


def test_dead_fetch_leftovers_removed(store_and_cache: Path) -> None:
    dead = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(dead.stdout)
    tmp = store_and_cache / "cache" / "tmp"
    tmp.mkdir(parents=True)
    (tmp / f"abc.{pid}.xyz").mkdir()
    (tmp / f"abc.{pid}.xyz" / "data").write_bytes(b"half")
    alive = tmp / f"def.{os.getpid()}.xyz"
    alive.mkdir()
    artifact_cache.evict()
    assert not (tmp / f"abc.{pid}.xyz").exists() and alive.exists()


RACER = textwrap.dedent(
    """
    import json, os, sys, time
    import django
    django.setup()
    from gym import artifact_cache
    go = sys.argv[1]
    while not os.path.exists(go):
        time.sleep(0.01)
    path = artifact_cache.fetch_folder("models/race")
    print(json.dumps({"path": str(path), "fetched": artifact_cache.FETCHES.get("models/race", 0),
                      "weights": len((path / "sub" / "model.safetensors").read_bytes())}))
    """
)


def test_two_processes_fetch_one_key(
    store_and_cache: Path, any_store: str, request: pytest.FixtureRequest
) -> None:
    folder = _model_folder(store_and_cache / "model", os.urandom(3_000_000))
    artifacts.put_folder("models/race", folder)
    go = store_and_cache / "go"
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "gym.settings",
        "GYM_VAR_DIR": str(store_and_cache / "var"),
        "GYM_ARTIFACTS_DIR": str(store_and_cache / "store"),
        "GYM_ARTIFACT_CACHE_DIR": str(store_and_cache / "cache"),
    }
    if any_store == "s3":
        seaweed = request.getfixturevalue("seaweed")
        env.update(seaweed.settings(prefix=settings.GYM_ARTIFACTS_URL.split("/", 3)[3]))
    env.pop("DATABASE_URL", None)
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, str(go)],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(2)
    ]
    go.touch()
    answers = []
    for racer in racers:
        out, err = racer.communicate(timeout=300)
        assert racer.returncode == 0, err
        answers.append(json.loads(out.strip().splitlines()[-1]))
    assert answers[0]["path"] == answers[1]["path"]
    assert sorted(a["fetched"] for a in answers) == [0, 1]  # one fetched, one waited
    assert all(a["weights"] == 3_000_000 for a in answers)
    assert list((store_and_cache / "cache" / "tmp").iterdir()) == []
