"""The fast subset for sweeps (docs/series.md#the-fast-subset): a fixed, seeded sample of
a benchmark's items, the same every time it is asked for.

Each item (a suite's item, a minimal pair with its sentences, a probing task's line) is
ranked by a SHA-256 of the seed and the item's own content, and the `size` first are
kept, in the benchmark's order. So the sample depends on the content, the size and the
seed only: the same items uploaded in another order give the same sample, a larger size
with the same seed holds every item of a smaller one, and an edit keeps the sample of
the items it left alone. A size at or above the benchmark's count is the whole benchmark
(no subset). Pure Python: no Django, no torch."""

from __future__ import annotations

import hashlib
import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gym.application_errors import FieldErrors

# The largest size and seed a request may name.
MAX_SIZE = 10_000_000
MAX_SEED = 2**31 - 1


class SubsetInvalid(FieldErrors):
    """`errors` maps `subset` (or `subset.size`, `subset.seed`) to what is wrong."""


@dataclass(frozen=True)
class Subset:
    """A sample of `size` items drawn with `seed`."""

    size: int
    seed: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"size": self.size, "seed": self.seed}


def _whole_number(value: Any, field: str, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise SubsetInvalid(
                {field: f"{what} must be a whole number from {low} to {high:,}, not {value!r:.40}"}
            )
    if not low <= value <= high:
        raise SubsetInvalid(
            {field: f"{what} must be a whole number from {low} to {high:,}, not {value}"}
        )
    return value


def subset_parse(value: Any, *, field: str = "subset") -> Subset | None:
    """The subset a request names: a size (`200`), or `{"size": 200, "seed": 0}` (seed 0
    when left out); None for none (null or absent). Raises SubsetInvalid naming the part
    that is wrong."""
    if value is None:
        return None
    if isinstance(value, dict):
        unknown = sorted(str(k)[:40] for k in value if k not in ("size", "seed"))
        if unknown:
            raise SubsetInvalid(
                {
                    f"{field}.{unknown[0]}": f"unknown field {unknown[0]!r}: a subset has size and seed"
                }
            )
        if "size" not in value:
            raise SubsetInvalid({f"{field}.size": 'give the subset\'s size: {"size": 200}'})
        size = _whole_number(value["size"], f"{field}.size", 1, MAX_SIZE, "the subset's size")
        seed = _whole_number(value.get("seed", 0), f"{field}.seed", 0, MAX_SEED, "the seed")
        return Subset(size, seed)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return Subset(_whole_number(value, field, 1, MAX_SIZE, "the subset's size"))
    raise SubsetInvalid(
        {
            field: f'a subset is a size (200) or {{"size": 200, "seed": 0}}, not '
            f"{type(value).__name__} {value!r:.40}"
        }
    )


def _rank(seed: int, key: str) -> bytes:
    return hashlib.sha256(f"{seed}\x00{key}".encode()).digest()


def sample_indices(keys: Sequence[str], subset: Subset | None) -> list[int] | None:
    """The positions of the items kept (in their order), each item named by `keys` (its
    content); None for the whole benchmark (no subset, or a size at or above the count).
    Identical keys are interchangeable items: whichever is kept, the sample is the same."""
    if subset is None or subset.size >= len(keys):
        return None
    ranked = sorted(range(len(keys)), key=lambda i: (_rank(subset.seed, keys[i]), keys[i]))
    return sorted(ranked[: subset.size])


def stratified_indices(
    groups: Sequence[str], keys: Sequence[str], fraction: float, seed: int
) -> list[int]:
    """About `fraction` of the items of each group (`groups[i]` is item i's: a probing
    task's label in one partition), at least one of every group, chosen as
    `sample_indices` chooses them; their positions in order."""
    members: dict[str, list[int]] = defaultdict(list)
    for index, group in enumerate(groups):
        members[group].append(index)
    kept: list[int] = []
    for positions in members.values():
        count = max(1, math.ceil(fraction * len(positions)))
        chosen = sample_indices([keys[i] for i in positions], Subset(count, seed))
        kept += positions if chosen is None else [positions[i] for i in chosen]
    return sorted(kept)


def subset_text(size: int, total: int, seed: int, noun: str = "items") -> str:
    """What pages say of a run on a subset: "subset: 200 of 1,000 items, seed 0"."""
    return f"subset: {size:,} of {total:,} {noun}, seed {seed}"


def subset_key(subset: Subset | None, total: int) -> dict[str, int]:
    """A run's subset fields for a benchmark of `total` items (its identity, with the
    total kept for pages): all 0 for the whole benchmark, as a size at or above the
    total is."""
    if subset is None or subset.size >= total:
        return {"subset_size": 0, "subset_seed": 0}
    return {"subset_size": subset.size, "subset_seed": subset.seed}


def run_subset(run: Any) -> Subset | None:
    """The subset a run (with the `Sampled` fields) was asked on; None for the whole."""
    return Subset(run.subset_size, run.subset_seed) if run.subset_size else None


def canonical_key(value: Any) -> str:
    """An item's content as one string (JSON, keys sorted): its identity in a sample."""
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def suite_sample(snapshot: dict[str, Any], subset: Subset | None) -> dict[str, Any]:
    """A suite's canonical form with only the sampled items (the whole one without a
    subset); an item is named by its conditions' contents, not by its number."""
    items = snapshot["items"]
    kept = sample_indices([canonical_key(item["conditions"]) for item in items], subset)
    if kept is None:
        return snapshot
    return {**snapshot, "items": [items[i] for i in kept]}
