"""The artifact store's server killed (SIGKILL, as a crashed machine): every call says the
store cannot be reached, naming where it was looked for, within seconds; started again on
its data, what was stored is back and calls work again. A worker's cache keeps serving
what it fetched before."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from django.test import override_settings

from gym import artifact_cache, artifacts, object_store
from tests.artifacts.conftest import s3_settings


def test_a_killed_store_is_said_and_comes_back(tmp_path: Path) -> None:
    store = object_store.start(tmp_path / "seaweed")
    try:
        port = int(store.endpoint.rsplit(":", 1)[1])
        with override_settings(
            **s3_settings(store, "down"), GYM_ARTIFACT_CACHE_DIR=tmp_path / "cache"
        ):
            kept = artifacts.put_content(io.BytesIO(b"the dog barks\n"), "corpora")
            cached = artifact_cache.fetch_file(kept.key, sha256=kept.sha256)
            store.stop(kill=True)
            calls = {
                "exists": lambda: artifacts.exists(kept.key),
                "put": lambda: artifacts.put_file("runs/x.json", io.BytesIO(b"{}")),
                "read": lambda: b"".join(artifacts.stream(kept.key)),
                "list": lambda: artifacts.list_prefix("corpora"),
            }
            for name, call in calls.items():
                with pytest.raises(artifacts.StoreUnavailable) as raised:
                    call()
                message = str(raised.value)
                assert message.startswith(
                    f"The artifact store at s3://gym/down ({store.endpoint}) could not be reached"
                ), (name, message)
            # What the worker fetched before is still served from its cache.
            assert artifact_cache.fetch_file(kept.key, sha256=kept.sha256) == cached
            assert cached.read_bytes() == b"the dog barks\n"

            store = object_store.start(tmp_path / "seaweed", port=port)
            assert b"".join(artifacts.stream(kept.key)) == b"the dog barks\n"
            artifacts.put_file("runs/x.json", io.BytesIO(b"{}"))
            assert artifacts.list_prefix("runs") == ["runs/x.json"]
    finally:
        store.stop()
