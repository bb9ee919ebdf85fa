"""Masked LM surprisal by pseudo-log-likelihood, within-word left-to-right variant.

PLL-word-l2r (Kauf & Ivanova 2023): to score a token, mask it and the later tokens of
the same word, so a word's first piece is not predicted from its own continuation.
Words are the tokenizer's pre-tokenization words (`word_ids`). Each scored token needs
its own masked copy of the sentence; the copies are length-sorted and split into
sub-batches that fit the token budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .forward import body_forward, gathered_surprisals, padded_inputs, plan_batches

if TYPE_CHECKING:
    from .loaded import LoadedModel

BatchDone = Callable[[list[int]], None]


@dataclass
class MaskedText:
    ids: list[int]  # with the tokenizer's special tokens ([CLS] ... [SEP])
    content: list[int]  # positions in `ids` of the sentence's own tokens
    word_ids: list[int | None]  # per position in `ids`


@dataclass
class MaskedRow:
    text: int
    token: int  # content token index
    ids: list[int]  # masked copy (possibly a window of a long sentence)
    target: int  # position of the scored token in `ids`
    target_id: int


def word_l2r_masks(word_ids: Sequence[int | None], content: Sequence[int]) -> list[list[int]]:
    """For each content position, the positions to mask: itself and its word's later pieces."""
    masks: list[list[int]] = []
    for position in content:
        word = word_ids[position]
        later = [
            other
            for other in content
            if other > position and word is not None and word_ids[other] == word
        ]
        masks.append([position, *later])
    return masks


def plan_rows(
    texts: Sequence[MaskedText], mask_id: int, context: int
) -> tuple[list[MaskedRow], list[dict[str, object]]]:
    """One masked copy per content token; windows centred on the token when too long."""
    rows: list[MaskedRow] = []
    diagnostics: list[dict[str, object]] = []
    for index, text in enumerate(texts):
        masks = word_l2r_masks(text.word_ids, text.content)
        too_long = len(text.ids) > context and bool(text.content)
        if not too_long:
            for k, positions in enumerate(masks):
                copy = list(text.ids)
                for position in positions:
                    copy[position] = mask_id
                target = text.content[k]
                rows.append(MaskedRow(index, k, copy, target, text.ids[target]))
        else:
            lead = text.ids[: text.content[0]]
            trail = text.ids[text.content[-1] + 1 :]
            pieces = [text.ids[p] for p in text.content]
            width = context - len(lead) - len(trail)
            if width < 1:
                raise ValueError("context length leaves no room for the sentence")
            for k, positions in enumerate(masks):
                start = min(max(0, k - width // 2), len(pieces) - width)
                window = pieces[start : start + width]
                for position in positions:
                    j = text.content.index(position) - start
                    if 0 <= j < width:
                        window[j] = mask_id
                rows.append(
                    MaskedRow(index, k, [*lead, *window, *trail], len(lead) + k - start, pieces[k])
                )
        diagnostics.append(
            {
                "no_bos_tokens": 0,
                "windows": 1 if not too_long else len(text.content),
                "truncated": too_long,
                "truncated_tokens": len(text.content) if too_long else 0,
            }
        )
    return rows, diagnostics


def score_rows(
    lm: LoadedModel,
    rows: Sequence[MaskedRow],
    n_tokens: Sequence[int],
    *,
    token_budget: int,
    batch_done: BatchDone | None = None,
) -> list[np.ndarray]:
    """Surprisal (bits) of every content token of every text."""
    results = [np.full(n, np.nan) for n in n_tokens]
    remaining = [0] * len(n_tokens)
    for row in rows:
        remaining[row.text] += 1
    if batch_done is not None:
        batch_done([text for text, count in enumerate(remaining) if count == 0])
    lengths = [len(row.ids) for row in rows]
    # Equal lengths keep their order: a sentence's copies stay together, so sentences
    # finish one by one.
    for batch in plan_batches(lengths, token_budget):
        width = lengths[batch[0]]
        ids, mask = padded_inputs(lm, [rows[index].ids for index in batch], width)
        positions = [r * width + rows[index].target for r, index in enumerate(batch)]
        tokens = [rows[index].target_id for index in batch]
        with torch.inference_mode():
            output = body_forward(lm, ids.to(lm.device), mask.to(lm.device))
            values = gathered_surprisals(
                lm,
                output,
                torch.tensor(positions),
                torch.arange(len(positions)),
                torch.tensor(tokens),
            ).numpy()
        done: list[int] = []
        for value, index in zip(values, batch, strict=True):
            row = rows[index]
            results[row.text][row.token] = value
            remaining[row.text] -= 1
            if remaining[row.text] == 0:
                done.append(row.text)
        if batch_done is not None:
            batch_done(done)
    return results
