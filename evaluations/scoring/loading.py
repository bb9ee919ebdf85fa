"""Loading a model once per process, deciding what kind it is, and saying why when we can't.

Hub ids and local `save_pretrained` folders go through the same Auto* calls, so the
tests' tiny local models exercise the code path a hub model takes.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from . import kinds, sources
from .checks import run_checks
from .loaded import DTYPES, LoadedModel
from .ngram import NgramModel, load_ngram
from .schema import ModelLoadError, ScoringError

if TYPE_CHECKING:
    from transformers import PreTrainedModel

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
    loaded = _load_cached(sources.resolve(source), revision, device, dtype, kind)
    if loaded.source != source:  # an artifact: source, loaded from a local path
        loaded.named = source
    return loaded


def _load_cached(
    source: str, revision: str | None, device: str | None, dtype: str | None, kind: str | None
) -> LoadedModel | NgramModel:
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
    run_checks(lm, config, local_dir)
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


def model_info(model: LoadedModel | NgramModel) -> dict[str, Any]:
    """What a run should record about the model it used; JSON-serialisable."""
    if isinstance(model, NgramModel):
        return model.info()
    return {
        "kind": model.kind,
        "source": model.named or model.source,
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
