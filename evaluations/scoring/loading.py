"""Loading a model once per process, deciding what kind it is, and saying why when we can't.

Hub ids and local `save_pretrained` folders go through the same Auto* calls, so the
tests' tiny local models exercise the code path a hub model takes.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from . import kinds
from .forward import find_split_head, verify_split_head
from .ngram import NgramModel, load_ngram
from .schema import ModelLoadError, ScoringError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "fp32": torch.float32,
    "bfloat16": torch.bfloat16,
    "bf16": torch.bfloat16,
    "float16": torch.float16,
    "fp16": torch.float16,
    "half": torch.float16,
}

# Models whose learned position table starts after the padding index: two rows of
# `max_position_embeddings` can never be used by a real token.
_PADDING_OFFSET_POSITIONS = {
    "roberta",
    "roberta-prelayernorm",
    "xlm-roberta",
    "xlm-roberta-xl",
    "camembert",
    "longformer",
    "data2vec-text",
    "ibert",
    "xmod",
    "mpnet",
}

# Bump when a load-time check changes, so that no answer of an older check is reused.
# 2: answers are kept per architecture and config, not per model files, and the checks
# run on one block of the model when its blocks are alike.
CHECKS_VERSION = 2
# Config fields that name a model rather than describe its architecture.
_IDENTITY_FIELDS = frozenset({"_name_or_path", "_commit_hash", "transformers_version"})

PROBE_TEXT = "The keys to the old cabinet are on the table, and nobody has moved them."


@dataclass(eq=False)
class LoadedModel:
    source: str
    revision: str | None
    kind: str  # "causal" or "masked" (n-gram models load as ngram.NgramModel)
    model: PreTrainedModel
    tokenizer: Any
    device: str
    dtype: str
    context_length: int  # tokens per forward pass, BOS or [CLS]/[SEP] included
    vocab_size: int
    bos_token_id: int | None
    bos_token: str | None
    mask_token_id: int | None
    pad_token_id: int
    # Output module run on selected positions only; None means full logits are computed.
    head: nn.Module | None = None
    # Whether packed prefix trees (4D masks + explicit positions) reproduce plain passes.
    tree_attention: bool = False
    n_params: int = 0
    n_params_nonembedding: int = 0
    notes: list[str] = field(default_factory=list)
    # Seconds each loading step took, and whether the checks came from the check cache.
    timings: dict[str, float] = field(default_factory=dict)
    # Per-thread working memory reused across calls (the output layer's logits).
    scratch: threading.local = field(default_factory=threading.local, repr=False)
    # The tokenizer's word-start tokens (boundary.WordBoundary), found on first use.
    word_boundary: Any = field(default=None, repr=False)

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]


log = logging.getLogger(__name__)

# Least recently used first: a worker asked for many models keeps only the last few in
# memory (set_max_loaded_models), instead of growing until the machine runs out.
_cache: OrderedDict[tuple[str, str | None, str, str], LoadedModel | NgramModel] = OrderedDict()
_cache_lock = threading.Lock()
_max_loaded = 2


def set_max_loaded_models(count: int) -> None:
    """How many models one process keeps loaded (at least 1); the oldest used go first."""
    global _max_loaded
    with _cache_lock:
        _max_loaded = max(1, int(count))
        _evict(keep=_max_loaded)


def _evict(*, keep: int) -> None:
    while len(_cache) > keep:
        _cache.popitem(last=False)


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "").strip().lower() in {"1", "true", "yes", "on"}


def resolve_device(device: str | None) -> str:
    if device is None:
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ScoringError(f"device '{device}' was asked for but CUDA is not available here")
    return device


def resolve_dtype(dtype: str | None) -> str:
    if dtype is None:
        return "float32"
    key = dtype.strip().lower().removeprefix("torch.")
    if key not in DTYPES:
        raise ScoringError(f"unknown dtype '{dtype}'; use one of float32, bfloat16, float16")
    return {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}[
        DTYPES[key]
    ]


def load_model(
    source: str,
    *,
    revision: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    kind: str | None = None,
) -> LoadedModel | NgramModel:
    """Load (once per process) a causal or masked LM from a hub id or a local folder, or
    an n-gram model from a file.

    `kind` overrides detection ("causal", "masked" or "ngram"). Raises ModelLoadError
    with a message meant for the person who asked for the run.
    """
    if kind == kinds.NGRAM or (kind is None and Path(source).expanduser().is_file()):
        return _load_ngram(source)
    resolved_device = resolve_device(device)
    resolved_dtype = resolve_dtype(dtype)
    key = (source, revision, resolved_device, resolved_dtype)
    with _cache_lock:
        cached = _cache.get(key)
        if isinstance(cached, LoadedModel) and (kind is None or cached.kind == kind):
            _cache.move_to_end(key)
            return cached
        # Make room before loading, so that two models never need memory at once.
        _cache.pop(key, None)
        _evict(keep=_max_loaded - 1)
        loaded = _load(source, revision, resolved_device, resolved_dtype, kind)
        _cache[key] = loaded
        return loaded


def loaded_model_keys() -> list[tuple[str, str | None, str, str]]:
    """What is loaded now, least recently used first."""
    with _cache_lock:
        return list(_cache)


def clear_model_cache() -> None:
    with _cache_lock:
        _cache.clear()


def _load_ngram(source: str) -> NgramModel:
    """n-gram files are read on the CPU and kept per process in the same bounded cache
    as any other model."""
    key = (source, None, "cpu", "ngram")
    with _cache_lock:
        cached = _cache.get(key)
        if isinstance(cached, NgramModel):
            _cache.move_to_end(key)
            return cached
        _evict(keep=_max_loaded - 1)
        loaded = _cache[key] = load_ngram(source)
        return loaded


def _not_found(source: str, local_dir: bool, exc: Exception) -> ModelLoadError:
    if local_dir:
        return ModelLoadError(f"model folder '{source}' could not be loaded: {exc}")
    return ModelLoadError(
        f"model '{source}' was not found locally and the hub cannot be reached: {exc}"
    )


def context_length(config: Any, tokenizer: Any, notes: list[str]) -> int:
    """Tokens one forward pass may hold, from the model config.

    `tokenizer.model_max_length` is only a last resort: it is often a sentinel (1e30).
    """
    length: int | None = None
    for name in ("n_positions", "max_position_embeddings", "n_ctx", "seq_length"):
        value = getattr(config, name, None)
        if isinstance(value, int) and value > 0:
            length = value
            break
    if length is None:
        tokenizer_max = getattr(tokenizer, "model_max_length", None)
        if isinstance(tokenizer_max, int) and 0 < tokenizer_max < 1_000_000:
            length = tokenizer_max
            notes.append(f"context length {length} taken from the tokenizer (none in config)")
        else:
            length = 1024
            notes.append("no context length in config or tokenizer; using 1024")
    if getattr(config, "model_type", "") in _PADDING_OFFSET_POSITIONS:
        length -= 2
    window = getattr(config, "sliding_window", None)
    if isinstance(window, int) and 0 < window < length:
        # Our own masks replace the model's; keep every pass inside its attention window.
        length = window
    return length


def _load(
    source: str, revision: str | None, device: str, dtype: str, kind: str | None
) -> LoadedModel:
    """Config, kind, tokenizer, weights, special tokens, then the load-time checks."""
    clock = time.perf_counter()
    timings: dict[str, float] = {}

    def lap(step: str) -> None:
        nonlocal clock
        now = time.perf_counter()
        timings[step] = now - clock
        clock = now

    options, local_dir = _hub_options(source, revision)
    config = _read_config(source, options, local_dir)
    if kind is None:
        kind = kinds.detect_kind(source, config=config)
    elif kind not in (kinds.CAUSAL, kinds.MASKED):
        raise ScoringError(f"kind must be one of {', '.join(kinds.KINDS)}, not '{kind}'")
    tokenizer = _read_tokenizer(source, options, local_dir)
    lap("config_and_tokenizer")
    model = _read_weights(source, kind, dtype, options, local_dir)
    # transformers types the wrapper of `.to`, not the method it wraps.
    model.to(device)  # type: ignore[arg-type]
    model.eval()

    notes: list[str] = []
    fused = fuse_tanh_gelu(model)
    if fused:
        notes.append(f"tanh-approximate GELU runs as one fused kernel ({fused} modules)")
    bos_id, bos_token = _bos(tokenizer, config)
    if kind == "causal" and bos_id is None:
        notes.append("model has no BOS token: first-token surprisals are missing")
    mask_id = getattr(tokenizer, "mask_token_id", None)
    if kind == "masked" and mask_id is None:
        raise ModelLoadError(f"masked LM '{source}' has no mask token in its tokenizer")
    output = model.get_output_embeddings()
    lm = LoadedModel(
        source=source,
        revision=revision,
        kind=kind,
        model=model,
        tokenizer=tokenizer,
        device=device,
        dtype=dtype,
        context_length=context_length(config, tokenizer, notes),
        vocab_size=int(output.weight.shape[0]) if output is not None else int(config.vocab_size),
        bos_token_id=bos_id,
        bos_token=bos_token,
        mask_token_id=mask_id,
        pad_token_id=_pad_id(tokenizer, bos_id),
        n_params=int(sum(p.numel() for p in model.parameters())),
        n_params_nonembedding=int(model.num_parameters(exclude_embeddings=True)),
        notes=notes,
        timings=timings,
    )
    lap("weights")
    _run_checks(lm, config, local_dir)
    # One line per load from disk (never for a model found in the cache): what the
    # worker's log says of how often a model was loaded.
    log.info("loaded model %s (revision %s)", source, revision or "default")
    return lm


def _hub_options(source: str, revision: str | None) -> tuple[dict[str, Any], bool]:
    """from_pretrained options shared by config, tokenizer and weights; is it a folder?"""
    local_dir = Path(source).expanduser().is_dir()
    options: dict[str, Any] = {
        "local_files_only": local_dir
        or _env_flag("HF_HUB_OFFLINE")
        or _env_flag("TRANSFORMERS_OFFLINE")
    }
    if revision:
        options["revision"] = revision
    return options, local_dir


def _read_config(source: str, options: dict[str, Any], local_dir: bool) -> Any:
    from transformers import AutoConfig

    try:
        return AutoConfig.from_pretrained(source, **options)
    except OSError as exc:
        raise _not_found(source, local_dir, exc) from exc
    except ValueError as exc:
        raise ModelLoadError(
            f"model '{source}' has a configuration that cannot be read: {exc}"
        ) from exc


def _read_tokenizer(source: str, options: dict[str, Any], local_dir: bool) -> Any:
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, **options)
    except OSError as exc:
        raise _not_found(source, local_dir, exc) from exc
    except (ValueError, ImportError) as exc:
        raise ModelLoadError(f"tokenizer of model '{source}' cannot be loaded: {exc}") from exc
    require_offsets(tokenizer, source)
    return tokenizer


def _read_weights(
    source: str, kind: str, dtype: str, options: dict[str, Any], local_dir: bool
) -> PreTrainedModel:
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    auto_class = AutoModelForCausalLM if kind == "causal" else AutoModelForMaskedLM
    try:
        return auto_class.from_pretrained(source, dtype=DTYPES[dtype], **options)
    except OSError as exc:
        raise _not_found(source, local_dir, exc) from exc
    except ValueError as exc:
        raise ModelLoadError(f"model '{source}' cannot be loaded as a {kind} LM: {exc}") from exc


def _pad_id(tokenizer: Any, bos_id: int | None) -> int:
    """Padding is masked out, so any real id does: pad, else EOS, else BOS, else 0."""
    for value in (tokenizer.pad_token_id, tokenizer.eos_token_id, bos_id):
        if isinstance(value, int):
            return value
    return 0


def _run_checks(lm: LoadedModel, config: Any, local_dir: bool) -> None:
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
        from .causal import check_tree_attention

        started = time.perf_counter()
        with _one_block(lm.model, config) as sliced:
            lm.tree_attention, note = check_tree_attention(lm)
        if sliced and not lm.tree_attention:
            lm.tree_attention, note = check_tree_attention(lm)
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


def fuse_tanh_gelu(model: nn.Module) -> int:
    """Swap Python-level tanh-GELU modules for torch's fused kernel; return how many.

    GPT-2's "gelu_new" is the same function as `gelu(x, approximate="tanh")` but runs as
    eight elementwise passes over the MLP activations; on a CPU those passes cost about
    as much as the matrix product before them. Values agree to float32 rounding
    (transformers documents GELUTanh as equivalent).
    """
    from transformers.activations import FastGELUActivation, GELUTanh, NewGELUActivation

    replaced = 0
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if type(child) in (NewGELUActivation, FastGELUActivation):
                setattr(module, name, GELUTanh())
                replaced += 1
    return replaced


def require_offsets(tokenizer: Any, source: str) -> None:
    """Alignment needs character offsets, which only fast (Rust) tokenizers give."""
    if not getattr(tokenizer, "is_fast", False):
        raise ModelLoadError(
            f"tokenizer of model '{source}' ({type(tokenizer).__name__}) gives no character "
            "offsets: a fast tokenizer (tokenizer.json) is needed to align tokens with regions"
        )


def _bos(tokenizer: Any, config: Any) -> tuple[int | None, str | None]:
    bos_id = getattr(tokenizer, "bos_token_id", None)
    if not isinstance(bos_id, int):
        bos_id = getattr(config, "bos_token_id", None)
        if not isinstance(bos_id, int):
            return None, None
    return bos_id, tokenizer.convert_ids_to_tokens(bos_id)


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


def model_info(model: LoadedModel | NgramModel) -> dict[str, Any]:
    """What a run should record about the model it used; JSON-serialisable."""
    if isinstance(model, NgramModel):
        return model.info()
    return {
        "kind": model.kind,
        "source": model.source,
        "revision": model.revision,
        "model_class": type(model.model).__name__,
        "model_type": getattr(model.model.config, "model_type", None),
        "n_params": model.n_params,
        "n_params_nonembedding": model.n_params_nonembedding,
        "context_length": model.context_length,
        "vocab_size": model.vocab_size,
        "bos_token": model.bos_token,
        "bos_token_id": model.bos_token_id,
        "mask_token": model.tokenizer.mask_token if model.kind == "masked" else None,
        "device": model.device,
        "dtype": model.dtype,
        "prefix_sharing": model.tree_attention,
        "separate_head": model.head is not None,
        "notes": list(model.notes),
    }
