"""Which models a comparison compares, for every kind that compares them (a suite's
page and API, a minimal-pair set's, the minimal pairs across sets): the names read from
the request, and the models chosen from them, each name left out said with its reason."""

from __future__ import annotations

from collections.abc import Collection, Sequence

# Names read from one request; the rest are left out, and the comparison says so.
MAX_NAMES = 20

LeftOut = list[tuple[str, str]]


def parse_model_names(values: Sequence[str]) -> list[str]:
    """`models=a,b` or `models=a&models=b` (a form's checkboxes), in order, without
    duplicates or blanks."""
    names: list[str] = []
    for value in values:
        for name in value.split(","):
            name = name.strip()
            if name and name not in names:
                names.append(name)
    return names


def read_names(names: Sequence[str]) -> tuple[list[str], LeftOut]:
    """The first MAX_NAMES of `names` (a name given twice counts once), and what is left
    out: a line for the rest, if any. Only these names are looked up."""
    names = list(dict.fromkeys(names))
    extra = len(names) - MAX_NAMES
    left_out = [(f"{extra} more", f"only {MAX_NAMES} names are read")] if extra > 0 else []
    return names[:MAX_NAMES], left_out


def choose(
    names: Sequence[str],
    left_out: LeftOut,
    *,
    found: Collection[str],
    most: int,
    too_many: str,
    current: Collection[str] | None = None,
    where: str = "",
) -> list[str]:
    """The first `most` of `names` that name a model (`found`) with a current result
    (`current`, the names that have one on this `where`; not asked when None). Every
    other name goes to `left_out` with the reason (`too_many` for those past `most`)."""
    chosen: list[str] = []
    for name in names:
        if name not in found:
            left_out.append((name, "no model has this name"))
        elif current is not None and name not in current:
            left_out.append((name, f"no current result on this {where}"))
        elif len(chosen) == most:
            left_out.append((name, too_many))
        else:
            chosen.append(name)
    return chosen
