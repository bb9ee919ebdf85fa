"""A training resumed on another machine takes its checkpoint's state and recorded inputs
from the store only as they were stored: each is checked by the hash recorded beside it
when it arrives in that machine's cache, and a damaged one is refused by name, leaving
nothing to resume from."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.core.files.base import ContentFile
from django.core.files.storage import storages
from django.test import override_settings

from evaluations.training import causal
from evaluations.training import stored as in_store
from gym import artifact_cache

STORE = "tiny-7-20250101000000000000"


def _trained_here(root: Path) -> Path:
    """What a worker's training folder holds after a checkpoint, stored as it stores it."""
    out_dir = root / "machine-a" / "tiny"
    checkpoint = out_dir / "checkpoint-64"
    checkpoint.mkdir(parents=True)
    (checkpoint / "config.json").write_text('{"model_type": "gpt2"}')
    (checkpoint / causal.STATE_NAME).write_bytes(b"optimizer and random states" * 50)
    (out_dir / causal.INPUTS_NAME).write_text('{"corpus": "abc"}')
    in_store.push_file(STORE, out_dir, causal.INPUTS_NAME)
    in_store.push_checkpoint(STORE, checkpoint, causal.STATE_NAME)
    return out_dir


def _damage(key: str) -> None:
    storage = storages["artifacts"]
    storage.delete(key)
    storage.save(key, ContentFile(b"not what was stored"))


def test_a_resume_elsewhere_gets_the_state_checked(tmp_path: Path) -> None:
    _trained_here(tmp_path)
    other = tmp_path / "machine-b" / "tiny"
    other.mkdir(parents=True)
    with override_settings(GYM_ARTIFACT_CACHE_DIR=tmp_path / "cache-b"):
        assert in_store.pull_for_resume(STORE, other, causal.STATE_NAME) == "checkpoint-64"
    state = other / "checkpoint-64" / causal.STATE_NAME
    assert state.read_bytes() == b"optimizer and random states" * 50
    assert (other / causal.INPUTS_NAME).read_text() == '{"corpus": "abc"}'


@pytest.mark.parametrize("damaged", [causal.STATE_NAME, causal.INPUTS_NAME])
def test_a_damaged_state_or_inputs_is_refused_and_nothing_resumes(
    tmp_path: Path, damaged: str
) -> None:
    _trained_here(tmp_path)
    key = (
        in_store.state_key(STORE, "checkpoint-64", causal.STATE_NAME)
        if damaged == causal.STATE_NAME
        else f"{in_store.prefix(STORE)}/{causal.INPUTS_NAME}"
    )
    _damage(key)
    other = tmp_path / "machine-b" / "tiny"
    other.mkdir(parents=True)
    with override_settings(GYM_ARTIFACT_CACHE_DIR=tmp_path / "cache-b"):
        with pytest.raises(artifact_cache.CorruptArtifact, match=f"stored object {key} is damaged"):
            in_store.pull_for_resume(STORE, other, causal.STATE_NAME)
        # The checkpoint's model (and the state, when it is the inputs that are damaged)
        # arrived whole; the damaged file left nothing in the cache.
        whole = 1 if damaged == causal.STATE_NAME else 2
        assert artifact_cache.cache_report()["entries"] == whole
    assert not (other / "checkpoint-64").exists()  # nothing this worker would resume from
