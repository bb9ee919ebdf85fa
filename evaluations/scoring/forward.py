"""Forward passes and the log-probability rule shared by causal and masked scoring (and
the batches of right-padded inputs that probing's feature extraction shares with them).

Only the positions whose next (or masked) token is scored go through the output layer,
and each gets logsumexp(row in float32) - target logit (float32): no float32
log-softmax over the whole vocabulary is ever materialised.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import torch
from torch import nn

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from .loaded import LoadedModel

LN2 = math.log(2.0)

# Upper bound on logits held at once (elements): 2**26 float32 values are 256 MiB, so
# memory is bounded by this, not by the token budget times the vocabulary. Large
# blocks matter on a CPU: the output layer's matrix product reaches about 80 GFLOP/s
# on a thousand rows at a time but only about 50 on a hundred.
HEAD_CHUNK_ELEMENTS = 2**26


def find_split_head(model: nn.Module) -> nn.Module | None:
    """The output module that maps the base model's hidden states to logits, if unique.

    Running it on the selected positions alone is what saves most of the head's cost;
    `verify_split_head` decides whether it may be used for this model.
    """
    base = getattr(model, "base_model", model)
    if base is model:
        return None
    others = [module for _, module in model.named_children() if module is not base]
    if len(others) != 1:
        return None
    return others[0]


def plan_batches(lengths: Sequence[int], token_budget: int) -> list[list[int]]:
    """Indices grouped longest first, each batch's rows x longest length within budget."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[int]] = []
    start = 0
    while start < len(order):
        width = max(1, lengths[order[start]])
        count = max(1, token_budget // width)
        batches.append(order[start : start + count])
        start += count
    return batches


def padded_inputs(
    lm: LoadedModel, rows: Sequence[Sequence[int]], width: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Input ids (`rows` right-padded with the model's pad token to `width`) and their
    attention mask, on the CPU."""
    ids = torch.full((len(rows), width), lm.pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        ids[r, : len(row)] = torch.tensor(row)
        mask[r, : len(row)] = 1
    return ids, mask


def body_forward(
    lm: LoadedModel,
    input_ids: torch.Tensor,
    attention_mask: torch.Tensor,
    position_ids: torch.Tensor | None = None,
) -> torch.Tensor:
    """Last hidden states when the head runs apart, else the model's full logits."""
    kwargs: dict[str, object] = {"input_ids": input_ids, "attention_mask": attention_mask}
    if position_ids is not None:
        kwargs["position_ids"] = position_ids
    if lm.kind == "causal":
        kwargs["use_cache"] = False
    if lm.head is not None:
        return lm.model.base_model(**kwargs).last_hidden_state
    return lm.model(**kwargs).logits


def gathered_surprisals(
    lm: LoadedModel,
    output: torch.Tensor,
    positions: torch.Tensor,
    pair_rows: torch.Tensor,
    pair_tokens: torch.Tensor,
) -> torch.Tensor:
    """Surprisal in bits of `pair_tokens[i]` at flat position `positions[pair_rows[i]]`.

    `output` is what `body_forward` returned, shape (batch, length, width). Returns a
    float32 CPU tensor with one value per pair.
    """
    return gathered_with_boundary(lm, output, positions, pair_rows, pair_tokens, None)[0]


def gathered_with_boundary(
    lm: LoadedModel,
    output: torch.Tensor,
    positions: torch.Tensor,
    pair_rows: torch.Tensor,
    pair_tokens: torch.Tensor,
    boundary_ids: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """`gathered_surprisals`, and with `boundary_ids` also log2 of the probability mass of
    those tokens at each pair's position (log2 B, see boundary.py): logsumexp over the
    boundary ids minus the row's logsumexp, from the same float32 logits."""
    flat = output.reshape(-1, output.shape[-1])
    selected = flat.index_select(0, positions.to(flat.device))
    pair_rows = pair_rows.to(flat.device)
    pair_tokens = pair_tokens.to(flat.device)
    result = torch.empty(pair_rows.shape[0], dtype=torch.float32, device=flat.device)
    boundary = None
    if boundary_ids is not None:
        boundary_ids = boundary_ids.to(flat.device)
        boundary = torch.empty_like(result)
    chunk = max(1, HEAD_CHUNK_ELEMENTS // max(1, lm.vocab_size))
    for low in range(0, selected.shape[0], chunk):
        high = min(low + chunk, selected.shape[0])
        rows = selected[low:high]
        logits = head_logits(lm, rows, chunk) if lm.head is not None else rows.clone()
        logits = logits.float()
        inside = (pair_rows >= low) & (pair_rows < high)
        local = pair_rows[inside] - low
        target = logits[local, pair_tokens[inside]]  # advanced indexing copies
        marked = None
        if boundary_ids is not None:
            # Before log_norm_ overwrites the logits in place.
            marked = torch.logsumexp(logits.index_select(1, boundary_ids), dim=-1)
        norm = log_norm_(logits)
        result[inside] = (norm[local] - target) / LN2
        if boundary is not None and marked is not None:
            boundary[inside] = (marked[local] - norm[local]) / LN2
    return result.cpu(), None if boundary is None else boundary.cpu()


def head_logits(lm: LoadedModel, rows: torch.Tensor, chunk: int) -> torch.Tensor:
    """The output layer on `rows`, written into a reused buffer when it is a float32 Linear.

    The CPU allocator maps every fresh block of logits (hundreds of MiB) from the kernel
    and page-faults it in again, which showed up as heavy system time on a small VM;
    one buffer per thread is reused instead.
    """
    head = lm.head
    assert head is not None, "called only for a model whose head runs apart"
    if not (isinstance(head, nn.Linear) and head.weight.dtype == torch.float32):
        return head(rows)
    scratch = lm.scratch
    buffer = getattr(scratch, "logits", None)
    if (
        buffer is None
        or buffer.device != rows.device
        or buffer.shape[0] < rows.shape[0]
        or buffer.shape[1] != head.out_features
    ):
        buffer = torch.empty(max(chunk, rows.shape[0]), head.out_features, device=rows.device)
        scratch.logits = buffer
    out = buffer[: rows.shape[0]]
    torch.mm(rows.float(), head.weight.t(), out=out)
    if head.bias is not None:
        out.add_(head.bias)
    return out


def log_norm_(logits: torch.Tensor) -> torch.Tensor:
    """logsumexp over the last axis, computed in place (the input is destroyed).

    Same arithmetic as torch.logsumexp (shift by the row maximum, exp, sum, log), but
    without its temporary copy of the whole block: four passes over memory instead of
    about eight (measured on a 128 x 50,257 block: 8 ms instead of 37 ms).
    """
    peak = logits.amax(dim=-1, keepdim=True)
    peak = torch.where(torch.isfinite(peak), peak, torch.zeros_like(peak))
    return logits.sub_(peak).exp_().sum(dim=-1).log_().add_(peak.squeeze(-1))


def verify_split_head(
    model: PreTrainedModel, head: nn.Module, inputs: dict[str, torch.Tensor], *, half: bool
) -> bool:
    """Does base model + head reproduce the model's own logits on a probe?

    Some architectures scale or soft-cap logits after the head, or build the head from
    several modules; for those the full forward is used instead.
    """
    try:
        with torch.inference_mode():
            full = model(**inputs).logits.float()
            hidden = model.base_model(**inputs).last_hidden_state
            split = head(hidden).float()
    except Exception:  # any failure just means: do not take the shortcut
        return False
    if split.shape != full.shape:
        return False
    scale = 1.0 + float(full.abs().max())
    tolerance = (2e-2 if half else 1e-4) * scale
    return float((split - full).abs().max()) <= tolerance
