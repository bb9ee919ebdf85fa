"""What kind of language model a source is: the one rule that registration (web, API) and
loading (workers, the `score` command) share, so that they can never disagree.

Kinds:
- "causal": a transformers model whose architecture predicts the next token;
- "masked": a transformers model with a masked-LM head (scored by pseudo-log-likelihood);
- "ngram": a word n-gram file: ARPA text (as KenLM and SRILM write it), gzipped ARPA,
  or a CMU Sphinx binary (the trie `.lm.bin` or the older DMP).

A source that is a file is an n-gram model or nothing; anything else (a hub id or a
folder) is read through its transformers config. No Django, and no torch import: the
config is read with transformers only when a config is needed.
"""

from __future__ import annotations

import gzip
import zlib
from pathlib import Path
from typing import Any

from .schema import ModelLoadError

CAUSAL = "causal"
MASKED = "masked"
NGRAM = "ngram"
KINDS: tuple[str, ...] = (CAUSAL, MASKED, NGRAM)

# n-gram file formats, as `ngram_format` names them.
ARPA = "arpa"
ARPA_GZ = "arpa.gz"
SPHINX_TRIE = "sphinx-trie"
SPHINX_DMP = "sphinx-dmp"

NGRAM_FORMATS_TEXT = "an ARPA file (plain or gzipped) or a CMU Sphinx binary (.lm.bin trie or DMP)"

_SNIFF_BYTES = 4096


class ConfigUnavailable(ModelLoadError):
    """The model's transformers config cannot be read here (a hub id on an offline
    machine, a folder without config.json). The kind may still be known later."""


def _looks_like_arpa(head: bytes) -> bool:
    """ARPA starts with `\\data\\`, after optional blank lines and free text (SRILM and
    KenLM write none, but the format allows a preamble)."""
    return any(line.strip() == b"\\data\\" for line in head.splitlines()[:50])


def ngram_format(path: Path) -> str | None:
    """The n-gram format of a file from its first bytes, or None if it is not one."""
    try:
        with path.open("rb") as handle:
            head = handle.read(_SNIFF_BYTES)
    except OSError:
        return None
    if head.startswith(b"Trie Language Model"):
        return SPHINX_TRIE
    if b"Darpa Trigram LM" in head[:64]:
        return SPHINX_DMP
    if head.startswith(b"\x1f\x8b"):
        try:
            with gzip.open(path, "rb") as handle:
                inner = handle.read(_SNIFF_BYTES)
        except (OSError, EOFError, zlib.error):
            return None
        return ARPA_GZ if _looks_like_arpa(inner) else None
    return ARPA if _looks_like_arpa(head) else None


def kind_from_config(config: Any) -> str:
    """'causal' or 'masked' from a transformers config; ModelLoadError for anything else.

    The recorded architectures decide first (the classes transformers maps to causal or
    masked LM heads); a config without architectures falls back on what its model type
    can be loaded as.
    """
    from transformers.models.auto.modeling_auto import (
        MODEL_FOR_CAUSAL_LM_MAPPING_NAMES,
        MODEL_FOR_MASKED_LM_MAPPING_NAMES,
    )

    causal_names = set(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.values())
    masked_names = set(MODEL_FOR_MASKED_LM_MAPPING_NAMES.values())
    architectures = list(getattr(config, "architectures", None) or [])
    for name in architectures:
        if name in causal_names or name.endswith("ForCausalLM"):
            return CAUSAL
        if name in masked_names or name.endswith("ForMaskedLM"):
            return MASKED
    model_type = getattr(config, "model_type", "")
    if architectures:
        raise ModelLoadError(
            f"model is neither a causal nor a masked language model "
            f"(architectures {architectures}, model type '{model_type}')"
        )
    if getattr(config, "is_decoder", False) and model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return CAUSAL
    if model_type in MODEL_FOR_MASKED_LM_MAPPING_NAMES:
        return MASKED
    if model_type in MODEL_FOR_CAUSAL_LM_MAPPING_NAMES:
        return CAUSAL
    raise ModelLoadError(
        f"model is neither a causal nor a masked language model (model type '{model_type}')"
    )


def detect_kind(
    source: str,
    *,
    revision: str | None = None,
    config: Any = None,
    local_files_only: bool = False,
) -> str:
    """The kind of model `source` names: "causal", "masked" or "ngram".

    A file is sniffed for an n-gram format. Otherwise `config` (when the caller already
    read it) or the config read from `source` decides. Raises ConfigUnavailable when the
    config cannot be read, ModelLoadError when the source is readable but not a model
    Gym can score.
    """
    path = Path(source).expanduser()
    if path.is_file():
        if ngram_format(path) is None:
            raise ModelLoadError(
                f"'{source}' is a file but not an n-gram model Gym can read: give "
                f"{NGRAM_FORMATS_TEXT}, or the folder of a transformers model"
            )
        return NGRAM
    if config is None:
        try:
            from transformers import AutoConfig

            config = AutoConfig.from_pretrained(
                source, revision=revision or None, local_files_only=local_files_only
            )
        except Exception as exc:  # noqa: BLE001 - any failure only means "cannot read it here"
            raise ConfigUnavailable(
                f"could not read the model's config here ({exc.__class__.__name__})"
            ) from exc
    return kind_from_config(config)
