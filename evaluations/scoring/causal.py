"""Causal LM surprisal: BOS-conditioned, sliding-window, batched, prefix-shared.

Each unique sentence becomes one or more sequences (windows) of token ids. A sequence
scores p(ids[t] | ids[:t]) for t from its first target on; its last token is only ever
a target, so it is never fed to the model.

Two ways to run the sequences, equal within float32 noise:
- plain: length-sorted batches filled to the token budget, right padding, 2D mask;
- shared (default when the model allows it): a trie of all sequences, packed into rows
  run with a tree mask (see prefix.py), so each shared prefix is computed once.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from .forward import body_forward, gathered_with_boundary, padded_inputs, plan_batches
from .prefix import PrefixTrie, Row

if TYPE_CHECKING:
    from .loaded import LoadedModel

# Rows of the packed trie hold up to this many nodes (more when one path is longer).
# Attention work grows with the square of the row length, the rest linearly, so short
# rows keep the mask's overhead to a few percent while still filling batches.
ROW_CAPACITY = 128

BatchDone = Callable[[list[int]], None]  # receives the indices of texts just finished


@dataclass
class CausalSequence:
    ids: list[int]  # window of the full sequence; BOS first when the model has one
    first_target: int  # local index of the first token scored in this window
    token_base: int  # content token index = local index + token_base
    text: int  # index of the unique text it belongs to


def plan_sequences(
    token_ids: Sequence[Sequence[int]], bos_id: int | None, context: int, stride: int | None = None
) -> tuple[list[CausalSequence], list[dict[str, object]]]:
    """Sequences to run for each text, and each text's diagnostics.

    A text longer than the context is covered by overlapping windows: each window after
    the first keeps `context - stride` tokens of left context and scores the next
    `stride` tokens, so each token is scored once.
    """
    if context < 2:
        raise ValueError("context length must be at least 2")
    stride = max(1, min(stride or context // 2, context - 1))
    sequences: list[CausalSequence] = []
    diagnostics: list[dict[str, object]] = []
    for text, content in enumerate(token_ids):
        lead = 1 if bos_id is not None else 0
        full = [bos_id, *content] if bos_id is not None else list(content)
        windows = 0
        if len(full) >= 2:
            end = min(context, len(full))
            sequences.append(CausalSequence(full[:end], 1, -lead, text))
            windows = 1
            while end < len(full):
                new_end = min(end + stride, len(full))
                start = new_end - context
                sequences.append(
                    CausalSequence(full[start:new_end], end - start, start - lead, text)
                )
                windows += 1
                end = new_end
        diagnostics.append(
            {
                "no_bos_tokens": 1 if (bos_id is None and content) else 0,
                "windows": windows,
                "truncated": len(full) > context,
                "truncated_tokens": max(0, len(full) - context),
            }
        )
    return sequences, diagnostics


def score_sequences(
    lm: LoadedModel,
    sequences: Sequence[CausalSequence],
    n_tokens: Sequence[int],
    *,
    token_budget: int,
    prefix_sharing: bool,
    batch_done: BatchDone | None = None,
) -> list[np.ndarray]:
    """Surprisal (bits) of every content token of every text; NaN where missing."""
    use_tree = prefix_sharing and lm.tree_attention
    return _score(lm, sequences, n_tokens, token_budget, use_tree, batch_done)[0]


def score_sequences_with_boundary(
    lm: LoadedModel,
    sequences: Sequence[CausalSequence],
    n_tokens: Sequence[int],
    boundary_ids: torch.Tensor,
    *,
    token_budget: int,
    prefix_sharing: bool,
    batch_done: BatchDone | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """`score_sequences`, and per text log2 B before each token (boundary.py): the
    probability mass of `boundary_ids` at the position that predicts that token."""
    use_tree = prefix_sharing and lm.tree_attention
    values, boundaries = _score(
        lm, sequences, n_tokens, token_budget, use_tree, batch_done, boundary_ids
    )
    assert boundaries is not None
    return values, boundaries


def _score(
    lm: LoadedModel,
    sequences: Sequence[CausalSequence],
    n_tokens: Sequence[int],
    token_budget: int,
    use_tree: bool,
    batch_done: BatchDone | None,
    boundary_ids: torch.Tensor | None = None,
) -> tuple[list[np.ndarray], list[np.ndarray] | None]:
    results = [np.full(n, np.nan) for n in n_tokens]
    boundaries = None if boundary_ids is None else [np.full(n, np.nan) for n in n_tokens]
    remaining = [0] * len(n_tokens)
    for seq in sequences:
        remaining[seq.text] += 1
    if batch_done is not None:
        # Texts with nothing to run (empty, or a single token without BOS) are done now.
        batch_done([text for text, count in enumerate(remaining) if count == 0])
    run = _run_shared if use_tree else _run_plain
    run(
        _Pass(lm, sequences, results, remaining, token_budget, batch_done, boundary_ids, boundaries)
    )
    return results, boundaries


@dataclass
class _Pass:
    """What the two ways of running a call's sequences work with: the sequences, and
    what they fill in: each text's values (and log2 B before each token, with
    `boundary_ids`), and how many of each text's sequences are still to run."""

    lm: LoadedModel
    sequences: Sequence[CausalSequence]
    results: list[np.ndarray]
    remaining: list[int]
    token_budget: int
    batch_done: BatchDone | None
    boundary_ids: torch.Tensor | None
    boundaries: list[np.ndarray] | None

    def finish(self, finished_seqs: Sequence[int]) -> None:
        """Count `finished_seqs` as run; tell `batch_done` of the texts now done."""
        done: list[int] = []
        for index in finished_seqs:
            text = self.sequences[index].text
            self.remaining[text] -= 1
            if self.remaining[text] == 0:
                done.append(text)
        if self.batch_done is not None:
            self.batch_done(done)


def _run_plain(work: _Pass) -> None:
    lm, sequences, results, boundaries = work.lm, work.sequences, work.results, work.boundaries
    token_budget, boundary_ids = work.token_budget, work.boundary_ids
    widths = [len(seq.ids) - 1 for seq in sequences]  # the last token is never an input
    for batch in plan_batches(widths, token_budget):
        width = widths[batch[0]]
        ids, mask = padded_inputs(lm, [sequences[index].ids[:-1] for index in batch], width)
        positions: list[int] = []
        tokens: list[int] = []
        for row, index in enumerate(batch):
            seq = sequences[index]
            for t in range(seq.first_target, len(seq.ids)):
                positions.append(row * width + t - 1)
                tokens.append(seq.ids[t])
        with torch.inference_mode():
            output = body_forward(lm, ids.to(lm.device), mask.to(lm.device))
            pair_rows = torch.arange(len(positions))
            gathered, marked = gathered_with_boundary(
                lm, output, torch.tensor(positions), pair_rows, torch.tensor(tokens), boundary_ids
            )
        values = gathered.numpy()
        marks = None if marked is None else marked.numpy()
        cursor = 0
        for index in batch:
            seq = sequences[index]
            n = len(seq.ids) - seq.first_target
            first = seq.first_target + seq.token_base
            results[seq.text][first : first + n] = values[cursor : cursor + n]
            if boundaries is not None and marks is not None:
                boundaries[seq.text][first : first + n] = marks[cursor : cursor + n]
            cursor += n
        work.finish(batch)


@dataclass
class _TreeBatch:
    rows: list[Row]
    owner_positions: list[int]  # flat positions whose logits this batch computes
    owner_nodes: list[int]


@dataclass
class SharedPlan:
    """Everything the shared path will run, decided before the first forward pass."""

    trie: PrefixTrie
    batches: list[_TreeBatch]
    node_pairs: dict[int, list[int]]  # node -> (node, next token) pairs it answers
    pair_tokens: list[int]
    seq_pairs: list[list[int]]  # per sequence, the pair of each scored token
    finishing: list[list[int]]  # per batch, the sequences whose last value it computes


def plan_shared(sequences: Sequence[CausalSequence], token_budget: int) -> SharedPlan:
    trie = PrefixTrie()
    # A (node, next token) pair is one log-probability, however many sentences need it.
    pair_index: dict[tuple[int, int], int] = {}
    node_pairs: dict[int, list[int]] = {}
    seq_pairs: list[list[int]] = []
    for seq in sequences:
        nodes = trie.insert(seq.ids[:-1])
        pairs: list[int] = []
        for t in range(seq.first_target, len(seq.ids)):
            key = (nodes[t - 1], seq.ids[t])
            pair = pair_index.get(key)
            if pair is None:
                pair = len(pair_index)
                pair_index[key] = pair
                node_pairs.setdefault(key[0], []).append(pair)
            pairs.append(pair)
        seq_pairs.append(pairs)
    pair_tokens = [0] * len(pair_index)
    pair_node = [0] * len(pair_index)
    for (node, token), pair in pair_index.items():
        pair_tokens[pair] = token
        pair_node[pair] = node

    capacity = max(ROW_CAPACITY, max((d + 1 for d in trie.depth), default=1))
    rows = trie.pack(capacity)

    # The batch that computes a node's logits is known up front, so a sentence can be
    # reported done as soon as its last value exists.
    batches: list[_TreeBatch] = []
    owner_batch: dict[int, int] = {}
    start = 0
    while start < len(rows):
        width = len(rows[start])
        chunk = rows[start : start + max(1, token_budget // width)]
        start += len(chunk)
        batch = _TreeBatch(chunk, [], [])
        for r, row in enumerate(chunk):
            for col, node in enumerate(row.nodes):
                if node in node_pairs and node not in owner_batch:
                    owner_batch[node] = len(batches)
                    batch.owner_positions.append(r * width + col)
                    batch.owner_nodes.append(node)
        batches.append(batch)
    finishing: list[list[int]] = [[] for _ in batches]
    for index, pairs in enumerate(seq_pairs):
        if pairs:
            finishing[max(owner_batch[pair_node[p]] for p in pairs)].append(index)
    return SharedPlan(trie, batches, node_pairs, pair_tokens, seq_pairs, finishing)


def work_stats(
    sequences: Sequence[CausalSequence], *, token_budget: int, prefix_sharing: bool
) -> dict[str, int]:
    """What a call will run: token positions (with and without padding), output rows.

    For benchmarks and FLOP estimates; costs a trie build, no forward pass.
    """
    targets = sum(len(seq.ids) - seq.first_target for seq in sequences)
    if not prefix_sharing:
        widths = [len(seq.ids) - 1 for seq in sequences]
        batches = plan_batches(widths, token_budget)
        return {
            "targets": targets,
            "positions": sum(widths),
            "padded_positions": sum(widths[batch[0]] * len(batch) for batch in batches),
            "head_rows": targets,
            "batches": len(batches),
        }
    plan = plan_shared(sequences, token_budget)
    return {
        "targets": targets,
        "trie_nodes": len(plan.trie),
        "positions": sum(len(row) for batch in plan.batches for row in batch.rows),
        "padded_positions": sum(len(b.rows) * len(b.rows[0]) for b in plan.batches),
        "head_rows": len(plan.node_pairs),
        "batches": len(plan.batches),
    }


def _run_shared(work: _Pass) -> None:
    lm, sequences, results, boundaries = work.lm, work.sequences, work.results, work.boundaries
    plan = plan_shared(sequences, work.token_budget)
    values = np.full(len(plan.pair_tokens), np.nan)
    marks = np.full(len(plan.pair_tokens), np.nan)
    for number, batch in enumerate(plan.batches):
        ids, positions, mask = _tree_inputs(lm, plan.trie, batch.rows)
        rows_of_pairs: list[int] = []
        tokens: list[int] = []
        pair_ids: list[int] = []
        for slot, node in enumerate(batch.owner_nodes):
            for pair in plan.node_pairs[node]:
                rows_of_pairs.append(slot)
                tokens.append(plan.pair_tokens[pair])
                pair_ids.append(pair)
        with torch.inference_mode():
            output = body_forward(lm, ids, mask, positions)
            gathered, marked = gathered_with_boundary(
                lm,
                output,
                torch.tensor(batch.owner_positions, dtype=torch.long),
                torch.tensor(rows_of_pairs, dtype=torch.long),
                torch.tensor(tokens, dtype=torch.long),
                work.boundary_ids,
            )
        values[pair_ids] = gathered.numpy()
        if marked is not None:
            marks[pair_ids] = marked.numpy()
        for index in plan.finishing[number]:
            seq = sequences[index]
            first = seq.first_target + seq.token_base
            picked = values[plan.seq_pairs[index]]
            results[seq.text][first : first + len(picked)] = picked
            if boundaries is not None:
                boundaries[seq.text][first : first + len(picked)] = marks[plan.seq_pairs[index]]
        work.finish(plan.finishing[number])


def _tree_inputs(
    lm: LoadedModel, trie: PrefixTrie, rows: Sequence[Row]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Token ids, position ids and the additive 4D ancestor mask for packed rows."""
    width = len(rows[0])
    ids = np.full((len(rows), width), lm.pad_token_id, dtype=np.int64)
    positions = np.zeros((len(rows), width), dtype=np.int64)
    allowed = np.zeros((len(rows), width, width), dtype=bool)
    for r, row in enumerate(rows):
        n = len(row)
        ids[r, :n] = [trie.token[node] for node in row.nodes]
        positions[r, :n] = row.depths
        visible = allowed[r]
        for i, parent in enumerate(row.parents):
            if parent >= 0:
                visible[i] = visible[parent]
            visible[i, i] = True
        # Padding attends to itself only, so no softmax row is empty.
        pad = np.arange(n, width)
        visible[pad, pad] = True
    dtype = lm.torch_dtype
    mask = torch.zeros(allowed.shape, dtype=dtype)
    mask.masked_fill_(torch.from_numpy(~allowed), torch.finfo(dtype).min)
    return (
        torch.from_numpy(ids).to(lm.device),
        torch.from_numpy(positions).to(lm.device),
        mask.unsqueeze(1).to(lm.device),
    )


def check_tree_attention(lm: LoadedModel) -> tuple[bool, str | None]:
    """Do packed trees reproduce plain passes for this model? Checked once, on a probe.

    Models that ignore explicit position ids or a custom 4D mask (ALiBi built from the
    2D mask, some attention kernels) would silently give wrong values; they fall back
    to plain batches.
    """
    texts = [
        "The keys to the old cabinet are on the table.",
        "The keys to the old cabinet is on the table.",
        "The keys to the cabinets are gone.",
        "A dog barked at the mailman yesterday.",
    ]
    content = [lm.tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
    sequences, _ = plan_sequences(content, lm.bos_token_id, lm.context_length)
    counts = [len(ids) for ids in content]
    try:
        plain = _score(lm, sequences, counts, 64, False, None)[0]
        shared = _score(lm, sequences, counts, 64, True, None)[0]
    except Exception as exc:  # any failure of the custom mask path means: do not use it
        return False, f"prefix sharing disabled: tree-masked forward failed ({exc})"
    worst = 0.0
    for a, b in zip(plain, shared, strict=True):
        if not np.array_equal(np.isnan(a), np.isnan(b)):
            worst = math.inf
        elif a.size:
            worst = max(worst, float(np.nan_to_num(np.abs(a - b)).max()))
    tolerance = 1e-3 if lm.torch_dtype == torch.float32 else 0.1
    if worst > tolerance:
        return False, f"prefix sharing disabled: tree-masked pass differs by {worst:.3g} bits"
    return True, None
