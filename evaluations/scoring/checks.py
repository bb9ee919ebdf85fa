"""The checks a loader runs on a model it has just loaded (`loading.load_model`): may the
output layer run apart from the model's body, may prefix trees be packed. Their answers
are kept in a cache across processes."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn

from . import causal
from .forward import find_split_head, verify_split_head
from .loaded import LoadedModel

# Bump when a load-time check changes, so that no answer of an older check is reused.
# 2: answers are kept per architecture and config, not per model files, and the checks
# run on one block of the model when its blocks are alike.
CHECKS_VERSION = 2
# Config fields that name a model rather than describe its architecture.
_IDENTITY_FIELDS = frozenset({"_name_or_path", "_commit_hash", "transformers_version"})

PROBE_TEXT = "The keys to the old cabinet are on the table, and nobody has moved them."


def run_checks(lm: LoadedModel, config: Any, local_dir: bool) -> None:
    """The load-time checks: may the output layer run apart, may prefix trees be packed.

    Their answers depend on the architecture and its config (and the dtype, the kind of
    device and the library versions), not on the weights or the process, so they are kept
    in the check cache (see `checks_cache_dir`): a later process, or another model of the
    same architecture and config (every checkpoint of a training run), skips the probe
    passes. A model seen for the first time is checked on one of its blocks when its
    blocks are alike (`_one_block`): what holds for one holds for each; a check that fails
    there is run again on the whole model before the answer counts.
    """
    started = time.perf_counter()
    key = _checks_key(lm, config, local_dir)
    cached = _read_checks(key)
    if cached is not None:
        if cached["separate_head"]:
            lm.head = find_split_head(lm.model)
        lm.tree_attention = bool(cached["tree_attention"])
        lm.notes.extend(str(note) for note in cached["notes"])
        lm.timings["checks_cached"] = time.perf_counter() - started
        return
    notes_before = len(lm.notes)
    with _one_block(lm.model, config) as sliced:
        _choose_head(lm)
    if sliced and lm.head is None:
        lm.notes.pop()  # "no separable head": said only once the whole model agrees
        _choose_head(lm)
    lm.timings["head_check"] = time.perf_counter() - started
    if lm.kind == "causal":
        started = time.perf_counter()
        with _one_block(lm.model, config) as sliced:
            lm.tree_attention, note = causal.check_tree_attention(lm)
        if sliced and not lm.tree_attention:
            lm.tree_attention, note = causal.check_tree_attention(lm)
        if note:
            lm.notes.append(note)
        lm.timings["tree_check"] = time.perf_counter() - started
    _write_checks(
        key,
        {
            "separate_head": lm.head is not None,
            "tree_attention": lm.tree_attention,
            "notes": lm.notes[notes_before:],
        },
    )


def _blocks(model: nn.Module, config: Any) -> tuple[nn.Module, str, nn.ModuleList] | None:
    """The model's list of transformer blocks (parent, attribute, list): a ModuleList of
    as many modules of one class as the config has layers, or None."""
    layers = None
    for name in ("num_hidden_layers", "n_layer", "num_layers"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 1:
            layers = value
            break
    if layers is None:
        return None
    for parent in model.modules():
        for attribute, child in parent.named_children():
            if (
                isinstance(child, nn.ModuleList)
                and len(child) == layers
                and len({type(block) for block in child}) == 1
            ):
                return parent, attribute, child
    return None


class _one_block:  # noqa: N801 - used as a context manager, like contextlib's
    """Within the block, the model runs its first transformer block only (entered as
    True), when its blocks are alike: one list of one class, no per-layer types in the
    config (alternating sliding and global attention, say). Otherwise the whole model
    (entered as False). The list is put back on leaving, whatever happened."""

    def __init__(self, model: nn.Module, config: Any) -> None:
        self.found = None
        layer_types = getattr(config, "layer_types", None)
        if not (isinstance(layer_types, list | tuple) and len(set(layer_types)) > 1):
            self.found = _blocks(model, config)

    def __enter__(self) -> bool:
        if self.found is None:
            return False
        parent, attribute, blocks = self.found
        setattr(parent, attribute, nn.ModuleList(list(blocks)[:1]))
        return True

    def __exit__(self, *exc: object) -> None:
        if self.found is not None:
            parent, attribute, blocks = self.found
            setattr(parent, attribute, blocks)


def checks_cache_dir() -> Path | None:
    """Where load-time check answers are kept: GYM_SCORING_CACHE ("off" for nowhere),
    else gym/scoring-checks under XDG_CACHE_HOME or ~/.cache."""
    raw = os.environ.get("GYM_SCORING_CACHE")
    if raw is not None:
        raw = raw.strip()
        return None if raw.lower() in ("", "0", "off", "none") else Path(raw).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "gym" / "scoring-checks"


def _checks_key(lm: LoadedModel, config: Any, local_dir: bool) -> str:
    """Everything a check's answer depends on: the architecture (model class, kind and
    config, less the fields that name the model), the dtype and kind of device, and the
    library versions. Not the weights: a model folder rewritten with another config is
    checked again, one with new weights of the same config is not."""
    import transformers

    described = {k: v for k, v in config.to_dict().items() if k not in _IDENTITY_FIELDS}
    parts = {
        "checks": CHECKS_VERSION,
        "config": described,
        "model_class": type(lm.model).__name__,
        "kind": lm.kind,
        "dtype": lm.dtype,
        "device": lm.device.split(":")[0],
        "torch": torch.__version__,
        "transformers": transformers.__version__,
    }
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _read_checks(key: str) -> dict[str, Any] | None:
    folder = checks_cache_dir()
    if folder is None:
        return None
    try:
        data = json.loads((folder / f"{key}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (
        isinstance(data, dict)
        and isinstance(data.get("separate_head"), bool)
        and isinstance(data.get("tree_attention"), bool)
        and isinstance(data.get("notes"), list)
    ):
        return None
    return data


def _write_checks(key: str, answers: dict[str, Any]) -> None:
    """Best effort: a cache that cannot be written only means the checks run again."""
    folder = checks_cache_dir()
    if folder is None:
        return
    try:
        folder.mkdir(parents=True, exist_ok=True)
        # Written aside and renamed, so a process reading it never sees half a file.
        with tempfile.NamedTemporaryFile(
            "w", dir=folder, suffix=".tmp", delete=False, encoding="utf-8"
        ) as handle:
            json.dump(answers, handle)
        os.replace(handle.name, folder / f"{key}.json")
    except OSError:
        return


def probe_inputs(lm: LoadedModel) -> dict[str, Any]:
    """A short real sentence in the model's own tokens, as forward keyword arguments."""
    if lm.kind == "masked":
        ids = lm.tokenizer(PROBE_TEXT, add_special_tokens=True)["input_ids"]
    else:
        ids = lm.tokenizer(PROBE_TEXT, add_special_tokens=False)["input_ids"]
        if lm.bos_token_id is not None:
            ids = [lm.bos_token_id, *ids]
    ids = ids[: lm.context_length] or [lm.pad_token_id]
    inputs: dict[str, Any] = {
        "input_ids": torch.tensor([ids], device=lm.device),
        "attention_mask": torch.ones(1, len(ids), dtype=torch.long, device=lm.device),
    }
    if lm.kind == "causal":
        inputs["use_cache"] = False
    return inputs


def _choose_head(lm: LoadedModel) -> None:
    head = find_split_head(lm.model)
    if head is not None and verify_split_head(
        lm.model, head, probe_inputs(lm), half=lm.torch_dtype != torch.float32
    ):
        lm.head = head
    else:
        lm.notes.append("output layer runs on every position (no separable head)")
