"""The artifact store (gym/artifacts.py) on its embedded default, a local folder, and on a
real S3 server (SeaweedFS): each test runs on both."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from gym import artifacts


@pytest.fixture
def local_store(any_store: str) -> str:
    return any_store


def test_put_exists_stream_list_delete(local_store: str, tmp_path: Path) -> None:
    source = tmp_path / "corpus.txt"
    source.write_bytes(b"the cat sleeps\n" * 100_000)
    stored = artifacts.put_content(source, "corpora")
    assert stored.key.startswith("corpora/") and len(stored.sha256) == 64
    assert artifacts.exists(stored.key) and artifacts.size(stored.key) == stored.size
    assert b"".join(artifacts.stream(stored.key)) == source.read_bytes()
    again = artifacts.put_content(io.BytesIO(source.read_bytes()), "corpora")
    assert again == stored
    assert artifacts.list_prefix("corpora") == [stored.key]
    artifacts.delete(stored.key)
    assert not artifacts.exists(stored.key) and artifacts.list_prefix("corpora") == []


def test_put_file_replaces(local_store: str) -> None:
    artifacts.put_file("runs/1/result.json", io.BytesIO(b"one"))
    artifacts.put_file("runs/1/result.json", io.BytesIO(b"two"))
    assert b"".join(artifacts.stream("runs/1/result.json")) == b"two"
    assert artifacts.list_prefix("runs") == ["runs/1/result.json"]


def test_folder_manifest(local_store: str, tmp_path: Path) -> None:
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "weights.safetensors").write_bytes(b"\0" * 1000)
    artifacts.put_folder("models/abc", folder)
    files = artifacts.read_manifest("models/abc")
    assert [f["path"] for f in files] == ["config.json", "sub/weights.safetensors"]
    assert files[1]["size"] == 1000
    assert "models/abc/files/sub/weights.safetensors" in artifacts.list_prefix("models/abc")


@pytest.mark.parametrize("key", ["", "/etc/passwd", "a/../b", "a//b", "a\\b", "./a"])
def test_bad_keys_refused(local_store: str, key: str) -> None:
    with pytest.raises(artifacts.BadKey):
        artifacts.exists(key)


def test_missing_key(local_store: str) -> None:
    with pytest.raises(FileNotFoundError, match="No artifact corpora/none"):
        artifacts.open_file("corpora/none")
