"""A loaded neural model: what the engine's forward passes (`forward`, `causal`,
`masked`) and the load-time checks (`checks`) work on. Loading one is `loading`'s."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

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
    # The source as it was asked for where it differs from `source` (an artifact: key
    # loaded from this machine's cache): what a run records, never the local path.
    named: str = ""

    @property
    def torch_dtype(self) -> torch.dtype:
        return DTYPES[self.dtype]
