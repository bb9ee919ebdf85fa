"""Probing vectors in the artifact store (gym.artifacts), so that a probing run of a model
on sentences some worker already read reuses its vectors on any machine, fetched through
that worker's cache: no model forward pass, and never a host path. The worker side: no
database.

Under `probing/vectors/<sha256>/` (a stored folder: a manifest and its files), the hash
of what makes the vectors (the model's artifact key, revision and dtype, the pooling, the
sentences in order and the memory bound, which decides float32 or float16):

    index.npy               sentence -> row of the deduplicated vectors (int64)
    layer-<k>.npy           layer k's vectors, (rows, width), as extracted
    vectors.json            layers, width and the extraction's notes

Only models stored under a key hold still (an uploaded model, a trained checkpoint): a
hub id or a folder may hold other weights tomorrow under the same name, so their vectors
are not kept."""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from evaluations.scoring import sources

from .extract import Features

log = logging.getLogger(__name__)

ROOT = "probing/vectors"
FORMAT = 1
META = "vectors.json"
INDEX = "index.npy"


def vectors_key(payload: dict[str, Any]) -> str | None:
    """Where the vectors of the payload's model on its sentences are kept, or None where
    the model is not one the store holds still."""
    model = payload["model"]
    if sources.artifact_key(str(model["source"])) is None:
        return None
    identity = {
        "format": FORMAT,
        "source": model["source"],
        "revision": model.get("revision") or "",
        "dtype": model.get("dtype") or "",
        "pooling": payload["pooling"],
        "memory_mb": int(payload["memory_mb"]),
        "sentences": hashlib.sha256(
            json.dumps(list(payload["sentences"]), ensure_ascii=False).encode()
        ).hexdigest(),
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()
    return f"{ROOT}/{digest}"


def _layer(k: int) -> str:
    return f"layer-{k:03d}.npy"


def push(key: str, features: Features) -> bool:
    """Store extracted vectors under `key` (best effort: a store that cannot take them
    costs the next run a forward pass, not this run its results)."""
    from gym import artifacts

    scratch = Path(tempfile.mkdtemp(prefix="gym-vectors-"))
    try:
        np.save(scratch / INDEX, features.index, allow_pickle=False)
        for k, array in enumerate(features.stored):
            np.save(scratch / _layer(k), np.asarray(array), allow_pickle=False)
        meta = {"layers": features.n_layers, "width": features.width, "notes": features.notes}
        (scratch / META).write_text(json.dumps(meta), encoding="utf-8")
        artifacts.put_folder(key, scratch)
    except artifacts.StoreUnavailable as exc:
        log.warning("probing vectors not stored under %s: %s", key, exc)
        return False
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return True


def load(folder: Path) -> Features:
    """Stored vectors from a fetched folder (memory-mapped: read as the probes need)."""
    meta = json.loads((folder / META).read_text(encoding="utf-8"))
    layers = int(meta["layers"])
    return Features(
        n_layers=layers,
        width=int(meta["width"]),
        index=np.load(folder / INDEX, allow_pickle=False),
        stored=[
            np.load(folder / _layer(k), mmap_mode="r", allow_pickle=False) for k in range(layers)
        ],
        folder=folder,
        owns_folder=False,
        notes=[*meta["notes"], "vectors read from the artifact store"],
    )
