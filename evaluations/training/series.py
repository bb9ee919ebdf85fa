"""Model series: checkpoints trained elsewhere, registered as models and read as learning
curves as a training run's checkpoints are (docs/series.md).

A series is registered from a folder of Trainer checkpoints (`checkpoint-500/`, ...)
under the model folders, from a source's revisions (a hub id and its revisions, or a
local stand-in for the hub: a folder under the model folders with one subfolder per
revision), or from models already registered. Each member knows its step and the tokens
(or, for BabyLM's `chck_<N>M`, the words) it had seen. Evaluating a series asks for the
ordinary runs of its members through the kinds registry, as a training run does."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from django.contrib.auth.models import AnonymousUser, User
from django.db import transaction
from django.utils.text import slugify

from evaluations import model_sources
from evaluations.language_models import registry
from evaluations.models import LanguageModel
from evaluations.runs import lifecycle as runs
from evaluations.subsets import Subset
from evaluations.training.models import ModelSeries, SeriesMember
from evaluations.training.services import tagged_suites
from gym.errors import FieldErrors

# The most checkpoints one series holds (each one a model, and a run per benchmark).
MAX_MEMBERS = 200
# A trainer_state.json larger than this is not read (the tokens are then unknown).
TRAINER_STATE_MAX_BYTES = 4 * 1024 * 1024
CHECKPOINT = re.compile(r"checkpoint-(\d{1,12})")
# BabyLM's checkpoint names: chck_<N>M after N million words.
BABYLM = re.compile(r"chck_(\d{1,9})M")
# Any other revision: its last number is its step (step1000, global_step1000, ...).
LAST_NUMBER = re.compile(r"(\d{1,12})(?!.*\d)")
# A revision as git and the hub allow it: no "..", no leading "/" or "-".
REVISION = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._/-]{0,99}")


# Addresses under /series/ that are pages, not series.
RESERVED_NAMES = frozenset({"register"})


class SeriesInvalid(FieldErrors):
    """`errors` maps each field of the request to what is wrong with it."""


@dataclass
class Member:
    """A checkpoint found before it is registered."""

    label: str  # its name within the series: checkpoint-500, step1000, chck_10M
    source: str
    revision: str
    step: int | None
    tokens: int | None
    # The tokens were given by the user (`tokens`), not read from the checkpoint or name.
    tokens_given: bool = False


def _model_folders() -> list[Path]:
    return [Path(d).expanduser().resolve() for d in registry.model_dirs()]


def _folder(raw: str, field: str) -> Path:
    """A folder under the model folders (absolute, or relative to one of them)."""
    folders = _model_folders()
    listing = ", ".join(str(f) for f in folders) or "(none configured)"
    raw = raw.strip()
    if not raw or "\x00" in raw:
        raise SeriesInvalid({field: "give the path of a folder under the model folders"})
    candidates = [Path(raw)] if Path(raw).is_absolute() else [f / raw for f in folders]
    for candidate in candidates:
        resolved = candidate.resolve()
        inside = any(resolved == f or f in resolved.parents for f in folders)
        if inside and resolved.is_dir():
            return resolved
    raise SeriesInvalid(
        {
            field: f"no folder {raw[:200]!r} under the model folders ({listing}); copy the "
            "checkpoints there, or ask the site's administrators to add their folder to "
            "GYM_MODEL_DIRS"
        }
    )


def trainer_tokens(folder: Path) -> int | None:
    """The tokens a Trainer checkpoint had seen, from its trainer_state.json
    (`num_input_tokens_seen`, written when the Trainer counts them); None when it has none."""
    state_file = folder / "trainer_state.json"
    try:
        if not state_file.is_file() or state_file.stat().st_size > TRAINER_STATE_MAX_BYTES:
            return None
        state = json.loads(state_file.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    if not isinstance(state, dict):
        return None
    seen = state.get("num_input_tokens_seen")
    if not isinstance(seen, int) or isinstance(seen, bool):
        for entry in reversed(state.get("log_history") or []):
            if isinstance(entry, dict) and isinstance(entry.get("num_input_tokens_seen"), int):
                seen = entry["num_input_tokens_seen"]
                break
    return seen if isinstance(seen, int) and not isinstance(seen, bool) and seen >= 0 else None


def folder_members(folder: Path, *, tokens_per_step: int | None) -> list[Member]:
    """The Trainer checkpoints in `folder`, by step."""
    found: list[Member] = []
    for child in sorted(folder.iterdir()):
        matched = CHECKPOINT.fullmatch(child.name)
        if matched is None or not child.is_dir():
            continue
        try:
            model_sources.folder_check(child)
        except model_sources.ModelSourceError as bad:
            raise SeriesInvalid({"folder": f"{child.name}: {bad}"}) from None
        step = int(matched.group(1))
        tokens = trainer_tokens(child)
        if tokens is None and tokens_per_step:
            tokens = step * tokens_per_step
        found.append(Member(child.name, str(child.resolve()), "", step, tokens))
    if not found:
        raise SeriesInvalid(
            {
                "folder": "that folder holds no Trainer checkpoints (subfolders named "
                "checkpoint-<step>, each saved with its tokenizer)"
            }
        )
    return sorted(found, key=lambda m: m.step or 0)


def revision_facts(revision: str, *, tokens_per_step: int | None) -> tuple[int | None, int | None]:
    """(step, tokens or words seen) read from a revision's name."""
    if matched := BABYLM.fullmatch(revision):
        return None, int(matched.group(1)) * 1_000_000
    if matched := LAST_NUMBER.search(revision):
        step = int(matched.group(1))
        return step, step * tokens_per_step if tokens_per_step else None
    return None, None


def revision_list(body: dict[str, Any]) -> list[str]:
    """The revisions asked for: `revisions`, or `pattern` with `{N}` filled from `steps`."""
    revisions = body.get("revisions")
    pattern = body.get("pattern")
    if revisions and pattern:
        raise SeriesInvalid({"pattern": "give revisions or a pattern with steps, not both"})
    if pattern:
        steps = body.get("steps") or []
        if "{N}" not in pattern:
            raise SeriesInvalid({"pattern": "a pattern holds {N} where the step goes: step{N}"})
        if not steps:
            raise SeriesInvalid({"steps": "give the steps the pattern's {N} takes"})
        revisions = [pattern.replace("{N}", str(step)) for step in steps]
    if not revisions:
        raise SeriesInvalid(
            {"revisions": "give the revisions, e.g. [\"step1000\", \"step2000\"] or BabyLM's "
             "[\"chck_1M\", \"chck_10M\"], or a pattern with steps"}
        )  # fmt: skip
    for index, revision in enumerate(revisions):
        if not REVISION.fullmatch(revision) or ".." in revision:
            raise SeriesInvalid(
                {
                    f"revisions.{index}": f"{revision[:100]!r} is no revision: letters, "
                    "digits, '.', '_', '-' and '/', at most 100, not starting with '-' or "
                    "'/', and no '..'"
                }
            )
    if len(set(revisions)) != len(revisions):
        raise SeriesInvalid({"revisions": "a revision is named twice"})
    return list(revisions)


def source_members(
    source: str, revisions: list[str], *, tokens_per_step: int | None
) -> list[Member]:
    """Members of a source's revisions: a hub id's (loaded with the revision), or a local
    stand-in's (one subfolder per revision, loaded as a folder)."""
    try:
        checked = model_sources.model_source_check(source, model_dirs=registry.model_dirs())
    except model_sources.ModelSourceError as bad:
        # A local stand-in is a folder of revisions, not a model folder itself.
        if "config.json" not in str(bad):
            raise SeriesInvalid({"source": str(bad)}) from None
        checked = model_sources.ModelSource(source=str(_folder(source, "source")), local=True)
    found: list[Member] = []
    for index, revision in enumerate(revisions):
        step, tokens = revision_facts(revision, tokens_per_step=tokens_per_step)
        if not checked.local:
            found.append(Member(revision, checked.source, revision, step, tokens))
            continue
        folder = (Path(checked.source) / revision).resolve()
        if Path(checked.source) not in folder.parents or not folder.is_dir():
            raise SeriesInvalid(
                {f"revisions.{index}": f"the source folder has no revision {revision!r}"}
            )
        try:
            model_sources.folder_check(folder)
        except model_sources.ModelSourceError as bad:
            raise SeriesInvalid({f"revisions.{index}": f"{revision}: {bad}"}) from None
        found.append(Member(revision, str(folder), "", step, tokens))
    return found


def _unit(members: Sequence[Member]) -> str:
    if all(m.tokens is not None for m in members):
        babylm = all(BABYLM.fullmatch(m.label) and not m.tokens_given for m in members)
        return ModelSeries.Unit.WORDS if babylm else ModelSeries.Unit.TOKENS
    if all(m.step is not None for m in members):
        return ModelSeries.Unit.STEPS
    raise SeriesInvalid(
        {
            "revisions": "the steps or tokens of some revisions cannot be read from their "
            "names: name them with their step (step1000) or BabyLM's chck_<N>M, or give "
            "steps, one per revision as listed"
        }
    )


def _member_model(series_name: str, member: Member, user: User | None) -> LanguageModel:
    """The registered model of a member: the one already registered from the same source
    and revision, or a new one."""
    existing = LanguageModel.objects.filter(source=member.source, revision=member.revision).first()
    if existing is not None:
        return existing
    name = slugify(f"{series_name}-{member.label}")[:100].strip("-")
    try:
        return registry.model_register(
            source=member.source,
            revision=member.revision,
            name=name,
            display_name=f"{series_name}@{member.label}",
            description=f"Checkpoint {member.label} of the series {series_name}.",
            user=user,
        )
    except registry.ModelRegistrationError as bad:
        raise SeriesInvalid(
            {f"{member.label}.{field}": message for field, message in bad.errors.items()}
        ) from None


def series_register(
    *,
    name: str,
    display_name: str = "",
    folder: str = "",
    source: str = "",
    revisions: Sequence[str] = (),
    pattern: str = "",
    steps: Sequence[int] = (),
    models: Sequence[LanguageModel] = (),
    tokens: Sequence[int | None] = (),
    tokens_per_step: int | None = None,
    group: str = "",
    threshold: float = 0.8,
    user: User | AnonymousUser | None = None,
) -> ModelSeries:
    """Register a series from `folder`, from `source` with `revisions` (or `pattern` and
    `steps`), or from registered `models` (uploaded checkpoints) with their `steps` and
    `tokens`. `tokens` with a folder or a source: the tokens seen of each checkpoint
    (`_tokens_given`), over what is read for it. Raises SeriesInvalid naming each bad
    field."""
    slug = slugify(name)[:100].strip("-")
    if not slug:
        raise SeriesInvalid({"name": "give a short name of letters, digits and hyphens"})
    if slug in RESERVED_NAMES:
        raise SeriesInvalid({"name": f"{slug!r} is a page of the site's; choose another name"})
    if ModelSeries.objects.filter(name=slug).exists():
        raise SeriesInvalid({"name": f"a series named {slug!r} exists; choose another name"})
    given = [bool(folder), bool(source), bool(models)]
    if sum(given) != 1:
        raise SeriesInvalid(
            {"folder": "give one of folder (Trainer checkpoints), source with revisions, or models"}
        )
    if folder and steps:
        raise SeriesInvalid(
            {
                "steps": "a folder's checkpoints take their steps from their names "
                "(checkpoint-500) and trainer_state.json; leave steps out"
            }
        )
    if folder:
        found = folder_members(_folder(folder, "folder"), tokens_per_step=tokens_per_step)
    elif source:
        asked = revision_list({"revisions": list(revisions), "pattern": pattern, "steps": steps})
        found = source_members(source, asked, tokens_per_step=tokens_per_step)
        if steps and not pattern:
            found = _steps_given(found, steps, tokens_per_step)
    else:
        found = _registered_members(models, steps, tokens)
    if tokens and not models:
        found = _tokens_given(found, tokens, "folder" if folder else "revisions")
    if len(found) > MAX_MEMBERS:
        raise SeriesInvalid({"folder": f"a series holds at most {MAX_MEMBERS} checkpoints"})
    unit = _unit(found)
    owner = user if isinstance(user, User) else None
    with transaction.atomic():
        series = ModelSeries.objects.create(
            name=slug,
            display_name=display_name or name,
            source=model_sources.public_source(folder or source, model_dirs=registry.model_dirs()),
            group=slugify(group)[:100],
            unit=unit,
            threshold=threshold,
            registered_by=owner,
            samples=[],
        )
        order = sorted(found, key=lambda m: (m.tokens if unit != "steps" else m.step) or 0)
        for position, member in enumerate(order):
            SeriesMember.objects.create(
                series=series,
                model=_member_model(slug, member, owner),
                step=member.step,
                tokens=member.tokens,
                position=position,
            )
    return series


def _tokens_given(found: list[Member], tokens: Sequence[int | None], of: str) -> list[Member]:
    """The members with the tokens the user gave, one per member in order (the folder's
    checkpoints by step, the revisions as listed); a null keeps what the checkpoint's
    trainer_state.json, `tokens_per_step` or the revision's name says."""
    if len(tokens) != len(found):
        labels = ", ".join(m.label for m in found[:10]) + (", ..." if len(found) > 10 else "")
        order = "by step" if of == "folder" else "as the revisions are listed"
        raise SeriesInvalid(
            {
                "tokens": f"give one number of tokens seen per checkpoint ({order}), or null "
                f"to keep what is read for it: {len(tokens)} given for {len(found)} "
                f"checkpoints ({labels})"
            }
        )
    given = [
        Member(m.label, m.source, m.revision, m.step, seen, True) if seen is not None else m
        for m, seen in zip(found, tokens, strict=True)
    ]
    words = [m.label for m in given if not m.tokens_given and BABYLM.fullmatch(m.label)]
    if words and len(words) != len(given):
        raise SeriesInvalid(
            {
                "tokens": f"give the tokens of every revision or of none: {words[0]} counts "
                "words (BabyLM's name), and one curve cannot mix words and tokens"
            }
        )
    return given


def _steps_given(
    found: list[Member], steps: Sequence[int], tokens_per_step: int | None
) -> list[Member]:
    """The members with the steps the user gave beside explicit revisions, one per
    revision as listed, over what the revisions' names say. The tokens are
    `tokens_per_step` times the given step, except for BabyLM's chck_<N>M, whose names
    say the words seen."""
    if len(steps) != len(found):
        raise SeriesInvalid(
            {
                "steps": f"give one step per revision, as the revisions are listed: "
                f"{len(steps)} given for {len(found)} revisions"
            }
        )
    if len(set(steps)) != len(steps):
        raise SeriesInvalid({"steps": "a step is given twice; each checkpoint has its own"})
    given = []
    for member, step in zip(found, steps, strict=True):
        tokens = member.tokens
        if tokens_per_step and not BABYLM.fullmatch(member.label):
            tokens = step * tokens_per_step
        given.append(replace(member, step=step, tokens=tokens))
    return given


def _registered_members(
    models: Sequence[LanguageModel], steps: Sequence[int], tokens: Sequence[int | None]
) -> list[Member]:
    if len(steps) != len(models):
        raise SeriesInvalid({"steps": "give one step for each model, in the same order"})
    if tokens and len(tokens) != len(models):
        raise SeriesInvalid({"tokens": "give the tokens seen of each model, or none"})
    if len({m.pk for m in models}) != len(models):
        raise SeriesInvalid({"models": "a model is named twice"})
    return [
        Member(m.name, m.source, m.revision, int(step), tokens[i] if tokens else None)
        for i, (m, step) in enumerate(zip(models, steps, strict=True))
    ]


def series_evaluate(
    *,
    series: ModelSeries,
    suites: Sequence[Any] = (),
    tags: Sequence[str] = (),
    pair_sets: Sequence[Any] = (),
    probing_tasks: Sequence[Any] = (),
    members: Sequence[str] = (),
    subset: Subset | None = None,
    user: User | AnonymousUser | None,
) -> dict[str, Any]:
    """Ordinary runs of the series' members (those named in `members`: model names or
    steps; all by default) on the benchmarks, asked for through the kinds registry; the
    benchmarks are added to the series' curves. Each kind's runs of one member are sent
    together, so that a worker loads the checkpoint once for all of them
    (docs/series.md). `subset` (evaluations.subsets): the runs are on a fixed, seeded
    sample of each benchmark, and the series' curves show that sample's, labelled so,
    beside (never mixed with) any on the whole benchmarks."""
    tagged, problems = tagged_suites(list(tags))
    if problems:
        raise SeriesInvalid(problems)
    listed = list(series.members.select_related("model").order_by("position"))
    if members:
        wanted = {str(s) for s in members}
        chosen = [m for m in listed if m.model.name in wanted or str(m.step) in wanted]
        known = {m.model.name for m in listed} | {str(m.step) for m in listed}
        unknown = sorted(wanted - known)
        if unknown:
            raise SeriesInvalid(
                {"members": f"no member {unknown[0][:100]!r}: name members by model or step"}
            )
        listed = chosen
    all_suites = list({s.pk: s for s in [*suites, *tagged]}.values())
    if not (all_suites or pair_sets or probing_tasks):
        raise SeriesInvalid(
            {"suites": "give suites, tags, pair_sets or probing_tasks to evaluate on"}
        )
    models = [m.model for m in listed]
    with transaction.atomic():
        series.sample_add(subset)
        series.suites.add(*all_suites)
        series.pair_sets.add(*pair_sets)
        series.probing_tasks.add(*probing_tasks)
        # Member by member, every kind's runs of one member before the next member's:
        # the work is queued in that order, so a worker takes a checkpoint's tasks one
        # after the other and loads it once for all of them (its cache keeps it loaded).
        for model in models:
            for kind, benchmarks in (
                ("suite", all_suites),
                ("pairs", list(pair_sets)),
                ("probing", list(probing_tasks)),
            ):
                if benchmarks:
                    runs.kind_named(kind).request_runs(
                        models=[model], benchmarks=benchmarks, user=user, subset=subset
                    )
    return {
        "series": series.name,
        "models": [m.name for m in models],
        "suites": sorted(s.name for s in all_suites),
        "pair_sets": sorted(p.name for p in pair_sets),
        "probing_tasks": sorted(t.name for t in probing_tasks),
        "subset": subset.as_dict() if subset is not None else None,
    }
