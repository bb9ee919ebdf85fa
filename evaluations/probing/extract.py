"""Sentence vectors from every layer of a language model, in bounded memory.

Layer 0 is the embedding output; layer k is block k's output (as transformers reports
it in `hidden_states`). A sentence's vector at a layer is the float32 mean of the hidden
states over the sentence's own tokens: no BOS, no [CLS]/[SEP], no padding. For causal
models the last token's state is an option (`pooling="last"`).

Sentences are tokenized once, identical sentences run once, and batches are filled up
to a token budget in length order (as the scoring engine does), with right padding and
an attention mask. Only the model body runs: the output layer (50k-wide for GPT-2) is
never computed.

Memory: the vectors of all layers take sentences x layers x width floats. When that is
above `memory_limit_bytes` they are written as they come to one float16 file per layer
(a numpy memmap) and read back one layer at a time, so that the probe for one layer
needs only that layer in memory.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from evaluations.scoring.engine import default_token_budget
from evaluations.scoring.forward import padded_inputs, plan_batches
from evaluations.scoring.loading import LoadedModel
from evaluations.scoring.schema import ScoringError

POOLINGS = ("mean", "last")
DEFAULT_MEMORY_LIMIT = 2 * 1024**3  # bytes of float32 vectors kept in memory

Progress = Callable[[int, int], None]


@dataclass
class Features:
    """Per-layer sentence vectors. `layer(k)` gives a float32 (sentences, width) array in
    the order the sentences were given; rows of repeated sentences are shared."""

    n_layers: int
    width: int
    index: np.ndarray  # sentence -> row of the stored (deduplicated) vectors
    stored: list[np.ndarray]  # per layer, (rows, width): float32 in memory or float16 memmaps
    folder: Path | None = None  # where the memmaps live; removed by close()
    owns_folder: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def on_disk(self) -> bool:
        return self.folder is not None

    @property
    def n_sentences(self) -> int:
        return int(self.index.shape[0])

    def layer(self, k: int, rows: np.ndarray | None = None) -> np.ndarray:
        """Layer k's vectors (float32), for all sentences or the sentence indices `rows`."""
        picked = self.index if rows is None else self.index[rows]
        return np.asarray(self.stored[k][picked], dtype=np.float32)

    def close(self) -> None:
        self.stored = []
        if self.folder is not None and self.owns_folder:
            shutil.rmtree(self.folder, ignore_errors=True)

    def __enter__(self) -> Features:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass
class _Encoded:
    ids: list[int]  # the model input, specials included
    content: list[int]  # positions of the sentence's own tokens in `ids`


def encode(lm: LoadedModel, texts: Sequence[str]) -> tuple[list[_Encoded], int]:
    """Model inputs and content positions per text; also how many were cut to fit.

    Causal models: content tokens without the tokenizer's specials, after one BOS when
    the model has one (as the scoring engine conditions its first token). Masked models:
    the tokenizer's own template ([CLS] ... [SEP]); the special-token mask says which
    positions are content.
    """
    if not texts:
        return [], 0
    limit = lm.context_length
    out: list[_Encoded] = []
    cut = 0
    if lm.kind == "causal":
        encoding = lm.tokenizer(list(texts), add_special_tokens=False, return_attention_mask=False)
        prefix = [] if lm.bos_token_id is None else [lm.bos_token_id]
        for ids in encoding["input_ids"]:
            room = limit - len(prefix)
            if len(ids) > room:
                cut += 1
                ids = ids[:room]
            full = [*prefix, *ids]
            out.append(_Encoded(full, list(range(len(prefix), len(full)))))
        return out, cut
    encoding = lm.tokenizer(
        list(texts),
        add_special_tokens=True,
        return_special_tokens_mask=True,
        return_attention_mask=False,
    )
    for ids, special in zip(encoding["input_ids"], encoding["special_tokens_mask"], strict=True):
        content = [position for position, flag in enumerate(special) if not flag]
        if len(ids) > limit and content:
            # Keep the template's specials around the first tokens that fit.
            cut += 1
            room = max(0, limit - (len(ids) - len(content)))
            head, tail = ids[: content[0]], ids[content[-1] + 1 :]
            ids = [*head, *ids[content[0] : content[0] + room], *tail]
            content = list(range(len(head), len(head) + room))
        out.append(_Encoded(list(ids), content))
    return out, cut


def body(lm: LoadedModel) -> torch.nn.Module:
    """The transformer without its LM head (GPT2Model, BertModel, LlamaModel, ...)."""
    base = getattr(lm.model, "base_model", None)
    return base if isinstance(base, torch.nn.Module) else lm.model


def hidden_states(
    lm: LoadedModel, ids: torch.Tensor, mask: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    kwargs: dict[str, Any] = {"attention_mask": mask, "output_hidden_states": True}
    if lm.kind == "causal":
        kwargs["use_cache"] = False
    output = body(lm)(input_ids=ids, **kwargs)
    states = output.hidden_states
    if states is None:
        raise ScoringError(f"model {lm.source} does not report its hidden states")
    return tuple(states)


def pool(states: Sequence[torch.Tensor], weights: torch.Tensor) -> torch.Tensor:
    """(layers, batch, width) float32: each layer's states weighted over positions.

    `weights` is (batch, positions): 1/n on a sentence's n content tokens for the mean,
    a single 1 for the last token, 0 elsewhere (BOS, specials, padding).
    """
    w = weights.to(torch.float32).unsqueeze(1)  # (batch, 1, positions)
    return torch.stack([torch.bmm(w, layer.to(torch.float32)).squeeze(1) for layer in states])


def pooling_weights(encoded: Sequence[_Encoded], width: int, pooling: str) -> torch.Tensor:
    weights = torch.zeros((len(encoded), width), dtype=torch.float32)
    for row, item in enumerate(encoded):
        if not item.content:
            continue  # a sentence that tokenizes to nothing keeps a zero vector
        if pooling == "last":
            weights[row, item.content[-1]] = 1.0
        else:
            weights[row, item.content] = 1.0 / len(item.content)
    return weights


def n_hidden_states(lm: LoadedModel) -> tuple[int, int]:
    """(layers counting the embedding output, width), from one short forward pass."""
    with torch.inference_mode():
        ids = torch.tensor([[lm.pad_token_id]], device=lm.device)
        states = hidden_states(lm, ids, torch.ones_like(ids))
    return len(states), int(states[0].shape[-1])


def extract_features(
    lm: LoadedModel,
    sentences: Sequence[str],
    *,
    pooling: str = "mean",
    token_budget: int | None = None,
    memory_limit_bytes: int = DEFAULT_MEMORY_LIMIT,
    folder: str | Path | None = None,
    progress: Progress | None = None,
) -> Features:
    """Pooled vectors of every layer for `sentences` (plain strings).

    `progress(done, total)` counts input sentences finished. Vectors go to float16
    memmaps under `folder` (a temporary folder when None) once they would take more
    than `memory_limit_bytes` as float32.
    """
    budget = _checked_budget(lm, pooling, token_budget)
    unique: dict[str, int] = {}
    index = np.fromiter(
        (unique.setdefault(text, len(unique)) for text in sentences),
        dtype=np.int64,
        count=len(sentences),
    )
    texts = list(unique)
    n_layers, width = n_hidden_states(lm)
    if progress is not None:
        progress(0, len(sentences))
    stored, target, notes = _storage(len(texts), n_layers, width, memory_limit_bytes, folder)
    encoded, cut = encode(lm, texts)
    notes += _encoding_notes(lm, encoded, cut)
    weight = np.bincount(index, minlength=len(texts)) if len(texts) else np.zeros(0, int)
    finite = _fill(lm, encoded, stored, pooling, budget, weight, progress)
    if not finite:
        notes.append("some vectors are not finite (beyond the range of the storage dtype)")
    return Features(
        n_layers=n_layers,
        width=width,
        index=index,
        stored=stored,
        folder=target,
        owns_folder=target is not None and folder is None,
        notes=notes,
    )


def _checked_budget(lm: LoadedModel, pooling: str, token_budget: int | None) -> int:
    if pooling not in POOLINGS:
        raise ScoringError(f"pooling must be one of {', '.join(POOLINGS)}, not '{pooling}'")
    if pooling == "last" and lm.kind != "causal":
        raise ScoringError(
            "last-token pooling needs a causal model: a masked model's last content "
            "token has seen the whole sentence like every other token; use mean pooling"
        )
    budget = token_budget or default_token_budget(lm)
    if budget < 1:
        raise ScoringError("token_budget must be positive")
    return budget


def _storage(
    n_rows: int, n_layers: int, width: int, memory_limit_bytes: int, folder: str | Path | None
) -> tuple[list[np.ndarray], Path | None, list[str]]:
    """(per-layer arrays, their folder when on disk, notes): float32 in memory, or
    float16 memmaps when the float32 vectors would be above the limit."""
    need = n_rows * n_layers * width * 4
    if need <= memory_limit_bytes:
        return [np.zeros((n_rows, width), dtype=np.float32) for _ in range(n_layers)], None, []
    target = Path(tempfile.mkdtemp(prefix="gym-probing-")) if folder is None else Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    stored: list[np.ndarray] = [
        np.lib.format.open_memmap(
            target / f"layer-{k:03d}.npy",
            mode="w+",
            dtype=np.float16,
            shape=(n_rows, width),
        )
        for k in range(n_layers)
    ]
    note = (
        f"vectors stored on disk as float16 ({need / 1024**2:.0f} MiB as float32 is "
        f"above the {memory_limit_bytes / 1024**2:.0f} MiB limit)"
    )
    return stored, target, [note]


def _encoding_notes(lm: LoadedModel, encoded: list[_Encoded], cut: int) -> list[str]:
    notes: list[str] = []
    if cut:
        notes.append(
            f"{cut} sentence{'s' if cut != 1 else ''} longer than the model's "
            f"{lm.context_length}-token context cut to fit"
        )
    empty = sum(1 for item in encoded if not item.content)
    if empty:
        notes.append(f"{empty} sentence{'s' if empty != 1 else ''} had no tokens (zero vectors)")
    return notes


def _fill(
    lm: LoadedModel,
    encoded: list[_Encoded],
    stored: list[np.ndarray],
    pooling: str,
    budget: int,
    weight: np.ndarray,
    progress: Progress | None,
) -> bool:
    """Run the batches into `stored`; `weight` is how many input sentences each row
    stands for (for progress). Whether every stored value is finite."""
    done = 0
    total = int(weight.sum())
    finite = True
    lengths = [len(item.ids) for item in encoded]
    for batch in plan_batches(lengths, budget):
        pooled = _pooled_batch(lm, [encoded[i] for i in batch], pooling)
        rows = np.asarray(batch)
        for k, array in enumerate(stored):
            array[rows] = pooled[k]
            finite = finite and bool(np.isfinite(array[rows]).all())
        done += int(weight[rows].sum())
        if progress is not None:
            progress(done, total)
    for array in stored:
        if isinstance(array, np.memmap):
            array.flush()
    return finite


def _pooled_batch(lm: LoadedModel, items: list[_Encoded], pooling: str) -> np.ndarray:
    """(layers, batch, width) pooled vectors of one right-padded batch."""
    width = max(len(item.ids) for item in items)
    ids, mask = padded_inputs(lm, [item.ids for item in items], width)
    weights = pooling_weights(items, width, pooling).to(lm.device)
    with torch.inference_mode():
        states = hidden_states(lm, ids.to(lm.device), mask.to(lm.device))
        return pool(states, weights).cpu().numpy()
