"""A training's files in the artifact store, so that any machine can evaluate its
checkpoints and resume it (gym.artifacts). The worker side: no database.

Under `trained/<store folder>/` (the run's model name, its id and when it was asked for:
never the same for two trainings, so a cached key never stands for other content):

    checkpoint-<tokens>/    each checkpoint's model and tokenizer (a stored folder),
                            written before the checkpoint is reported
    states/checkpoint-<tokens>   its training state (optimizer, scheduler, random states,
                            data position), kept for the last `keep_states` as on disk
    inputs.json             what a resume must match (causal.check_inputs)
    <file>.sha256           beside each single file a worker fetches (a state,
                            inputs.json, model.arpa): its hash, checked on arrival
    loss.jsonl              the loss log so far (stored with each checkpoint, and every
                            LOSS_PUSH_SECONDS while training), for pages to read
    model/                  the finished model, with training.json and loss.jsonl
    model.arpa              an n-gram run's model

A killed worker's training resumes on another machine from the last checkpoint whose
state is in the store (`pull_for_resume`)."""

from __future__ import annotations

import logging
import shutil
from datetime import datetime
from pathlib import Path

from gym import artifact_cache, artifacts

from .options import CHECKPOINT_PREFIX, LOSS_FILE

log = logging.getLogger(__name__)

ROOT = "trained"
STATES = "states"
MODEL = "model"


def folder_name(name: str, run_id: int, asked_at: datetime) -> str:
    """A training's folder in the store: its model's name, its run's id and when it was
    asked for, so that no two trainings share a key (a worker's cache takes a key it
    holds for the same content)."""
    return f"{name}-{run_id}-{asked_at:%Y%m%d%H%M%S%f}"


def run_id_of(key: str) -> int | None:
    """The run whose store folder holds `key` (trained/<folder>/...), else None."""
    parts = key.split("/")
    if len(parts) < 3 or parts[0] != ROOT:
        return None
    pieces = parts[1].split("-")
    return int(pieces[-2]) if len(pieces) >= 3 and pieces[-2].isdigit() else None


def name_of(folder: str) -> str:
    """The model's name a store folder begins with: the name of the run's folder on each
    worker (under its own training folder)."""
    return folder.rsplit("-", 2)[0]


def loss_key(folder: str) -> str:
    """The loss log as the worker last stored it while training (the finished model's
    copy is under model/)."""
    return f"{prefix(folder)}/{LOSS_FILE}"


def model_loss_key(folder: str) -> str:
    return f"{prefix(folder)}/{MODEL}/files/{LOSS_FILE}"


def prefix(folder: str) -> str:
    return f"{ROOT}/{artifacts.check_key(folder)}"


def checkpoint_key(folder: str, name: str) -> str:
    return f"{prefix(folder)}/{name}"


def state_key(folder: str, name: str, state_name: str) -> str:
    return f"{prefix(folder)}/{STATES}/{name}/{state_name}"


def push_checkpoint(store: str, checkpoint: Path, state_name: str) -> str:
    """Store a checkpoint's model (and its training state apart): returns its key."""
    key = checkpoint_key(store, checkpoint.name)
    state = checkpoint / state_name
    what = f"the checkpoint {checkpoint.name}"
    if state.is_file():
        artifacts.patiently(
            lambda: artifacts.put_file(
                state_key(store, checkpoint.name, state_name), state, link=True, record_hash=True
            ),
            what=f"{what}'s training state",
        )
    artifacts.patiently(
        lambda: artifacts.put_folder(
            key, checkpoint, link=True, include=lambda p: p.name != state_name
        ),
        what=what,
    )
    return key


def push_file(store: str, out_dir: Path, name: str) -> str | None:
    """A file of the run's folder (inputs.json, model.arpa) under its name, its hash
    beside it for the cache that fetches it."""
    path = out_dir / name
    if not path.is_file():
        return None
    key = f"{prefix(store)}/{name}"
    artifacts.patiently(lambda: artifacts.put_file(key, path, record_hash=True), what=name)
    return key


def push_model(store: str, out_dir: Path) -> str:
    """The finished model: the files at the top of the run's folder (weights, config,
    tokenizer, training.json, loss.jsonl), not the checkpoints, the token files, the
    recorded inputs, STOP or a file being written."""
    key = f"{prefix(store)}/{MODEL}"

    def include(relative: Path) -> bool:
        name = relative.name
        return (
            len(relative.parts) == 1
            and name not in {"STOP", "inputs.json"}
            and not (name.endswith(".part"))
        )

    artifacts.patiently(
        lambda: artifacts.put_folder(key, out_dir, include=include), what="the trained model"
    )
    return key


def push_loss_log(store: str, out_dir: Path) -> None:
    """The loss log so far, for the run's pages and download (best effort: the finished
    model carries the whole log)."""
    path = out_dir / LOSS_FILE
    if not path.is_file():
        return
    try:
        artifacts.put_file(loss_key(store), path)
    except artifacts.StoreUnavailable as exc:
        log.warning("loss log of %s not stored: %s", store, exc)


def drop_checkpoint(store: str, name: str) -> None:
    """A checkpoint retention removed: gone from the store too."""
    artifacts.delete_prefix(checkpoint_key(store, name))
    artifacts.delete_prefix(f"{prefix(store)}/{STATES}/{name}")


def prune_states(store: str, out_dir: Path, state_name: str) -> None:
    """The training states the folder no longer keeps (keep_states) leave the store."""
    for key in artifacts.list_prefix(f"{prefix(store)}/{STATES}"):
        name = key.split("/")[-2]
        if not (out_dir / name / state_name).is_file():
            artifacts.delete(key)


def pull_for_resume(store: str, out_dir: Path, state_name: str) -> str | None:
    """A folder with nothing to resume from, whose training has a checkpoint with its
    state in the store (its worker died on another machine): that checkpoint and the
    recorded inputs are fetched into the folder. Returns the checkpoint's name, or None."""
    if any(out_dir.glob(f"{CHECKPOINT_PREFIX}*/{state_name}")):
        return None
    found = []
    for key in artifacts.list_prefix(f"{prefix(store)}/{STATES}"):
        name = key.split("/")[-2]
        tokens = name.removeprefix(CHECKPOINT_PREFIX)
        manifest = f"{checkpoint_key(store, name)}/manifest.json"
        if key.endswith(f"/{state_name}") and tokens.isdigit() and artifacts.exists(manifest):
            found.append((int(tokens), name, key))
    if not found:
        return None
    _tokens, name, key = max(found)
    target = out_dir / name
    shutil.rmtree(target, ignore_errors=True)
    partial = out_dir / f".{name}.fetching"
    shutil.rmtree(partial, ignore_errors=True)
    shutil.copytree(artifact_cache.fetch_folder(checkpoint_key(store, name)), partial)
    shutil.copyfile(artifact_cache.fetch_file(key), partial / state_name)
    inputs = f"{prefix(store)}/inputs.json"
    if artifacts.exists(inputs):
        shutil.copyfile(artifact_cache.fetch_file(inputs), out_dir / "inputs.json")
    partial.rename(target)  # the state inside: a checkpoint to resume from only now
    log.info("resuming %s from %s, fetched from the artifact store", store, name)
    return name
