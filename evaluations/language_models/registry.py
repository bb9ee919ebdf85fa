"""Registering language models: where one may come from, what kind it is, hiding it, and what a worker learns of it on first load. Every kind's runs use these models."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AnonymousUser, User
from django.db import IntegrityError, transaction
from django.db.models import Q, QuerySet
from django.utils.text import slugify

from evaluations import model_sources
from evaluations.models import LanguageModel
from gym.errors import FieldErrors
from suites.catalog_services import description_problem, invisible_characters


class ModelRegistrationError(FieldErrors):
    """`errors` maps each field of the registration to what is wrong with it."""

    def __init__(self, errors: dict[str, str]) -> None:
        super().__init__(errors, message="; ".join(f"{k}: {v}" for k, v in errors.items()))


def detect_kind(source: str, revision: str = "") -> tuple[str, str]:
    """The model's kind by the scoring engine's own rule (a file's first bytes, or a
    transformers config without weights), so that registration and workers agree. Only
    local files are read (no network).

    Returns (kind, note); kind is "unknown" when it cannot be told here (a config of
    another kind of model): the worker fills it in after its first load. Raises
    ModelRegistrationError for a file that is no model Gym can read."""
    # Imported here: the web process needs no scoring code until someone registers.
    from evaluations.scoring.kinds import detect_kind as scoring_detect_kind
    from evaluations.scoring.schema import ModelLoadError

    path = Path(source).expanduser()
    try:
        return scoring_detect_kind(source, revision=revision or None, local_files_only=True), ""
    except ModelLoadError as exc:
        if path.is_file():
            raise ModelRegistrationError({"source": str(exc)}) from None
        return LanguageModel.Kind.UNKNOWN, str(exc)


def model_dirs() -> list[Path]:
    """Where local models may lie: GYM_MODEL_DIRS, and always the site's own var/models,
    where the run command builds the random baseline; each once (by default they are the
    same folder, which messages would otherwise name twice)."""
    return list(
        dict.fromkeys(Path(d) for d in [*settings.GYM_MODEL_DIRS, settings.VAR_DIR / "models"])
    )


def training_dir() -> Path:
    """Where trained models are written: GYM_TRAINING_DIR, else `trained/` in the first
    of `model_dirs` (a folder the GPU workers share)."""
    configured = getattr(settings, "GYM_TRAINING_DIR", None)
    return Path(configured) if configured else model_dirs()[0] / "trained"


def model_register(
    *,
    source: str,
    display_name: str = "",
    name: str = "",
    revision: str = "",
    description: str = "",
    reference_url: str = "",
    user: User | None = None,
    is_baseline: bool = False,
    extra_model_dirs: Sequence[Path] = (),
) -> LanguageModel:
    """Register a model. `extra_model_dirs`: folders a trusted caller (a management command
    run by the site's administrators, never a page) allows besides GYM_MODEL_DIRS."""
    source = source.strip()
    errors: dict[str, str] = {}
    checked: model_sources.ModelSource | None = None
    try:
        checked = model_sources.model_source_check(
            source, model_dirs=[*model_dirs(), *extra_model_dirs]
        )
        source = checked.source
    except model_sources.ModelSourceError as invalid:
        errors["source"] = str(invalid)
    if checked is not None and checked.local and _inside_uploads(Path(checked.source)):
        errors["source"] = (
            "that folder holds the site's uploaded models, each registered by its upload; "
            "upload the model instead"
        )
    name, naming = naming_errors(
        name=name,
        display_name=display_name,
        description=description,
        default=source.rstrip("/").split("/")[-1],
    )
    errors.update(naming)
    if LanguageModel.objects.filter(source=source, revision=revision).exists():
        errors["source"] = f"{source!r} (revision {revision or 'default'}) is already registered"
    if errors:
        raise ModelRegistrationError(errors)
    # The web process reads a local config only where that is safe and small, and never
    # calls the hub; the worker learns the kind of any other model when it first loads it.
    kind: str = LanguageModel.Kind.UNKNOWN
    if checked is not None and model_sources.config_is_readable(checked):
        kind, _note = detect_kind(source, revision)
    try:
        with transaction.atomic():
            return LanguageModel.objects.create(
                name=name,
                display_name=display_name
                or (Path(source).name if checked is not None and checked.local else source),
                source=source,
                revision=revision,
                kind=kind,
                description=description,
                reference_url=reference_url,
                registered_by=user if user is not None and user.is_authenticated else None,
                is_baseline=is_baseline,
            )
    except IntegrityError:
        raise ModelRegistrationError({"name": "that model was registered a moment ago"}) from None


def naming_errors(
    *, name: str, display_name: str, description: str, default: str
) -> tuple[str, dict[str, str]]:
    """The short name a new model gets (`name`, else made from the display name, else
    from `default`), and what is wrong with the names and description given, by field."""
    errors: dict[str, str] = {}
    if invisible := invisible_characters(display_name):
        errors["display_name"] = f"the name may not contain {invisible}"
    if too_long := description_problem(description):
        errors["description"] = too_long
    # A made name is cut to the column's length (a file's name may be longer).
    name = slugify(name or display_name or default)[:100].strip("-")
    if not name:
        errors["name"] = "give a short name of letters, digits and hyphens"
    elif LanguageModel.objects.filter(name=name).exists():
        errors["name"] = f"a model named {name!r} is already registered; choose another name"
    return name, errors


def uploaded_models_root() -> Path:
    """Where uploaded models lie: GYM_UPLOADED_MODELS_DIR, else `uploads/` in the first of
    `model_dirs` (a folder the workers load local models from)."""
    configured = settings.GYM_UPLOADED_MODELS_DIR
    return Path(configured) if configured else model_dirs()[0] / "uploads"


def uploaded_model_dir(content_hash: str) -> Path:
    """The folder of the uploaded model whose file has this SHA-256: the one place that
    says where an upload's files are (a shared store will answer it later)."""
    return uploaded_models_root() / content_hash


def _inside_uploads(path: Path) -> bool:
    root = uploaded_models_root().expanduser().resolve()
    return path == root or root in path.parents


def visible_models(user: User | AnonymousUser | None) -> QuerySet[LanguageModel]:
    """The models `user` may see in lists and by name, pages and API alike: every one for
    staff; others see the models not hidden, and those they registered themselves."""
    models = LanguageModel.objects.all()
    if user is not None and user.is_staff:
        return models
    if user is not None and user.is_authenticated:
        return models.filter(Q(is_hidden=False) | Q(registered_by=user.pk))
    return models.filter(is_hidden=False)


def model_set_hidden(*, model: LanguageModel, hidden: bool) -> LanguageModel:
    model.is_hidden = hidden
    model.save(update_fields=["is_hidden"])
    return model


def learn_model_facts(model: LanguageModel, info: dict[str, Any]) -> None:
    changes: dict[str, Any] = {}
    if model.kind == LanguageModel.Kind.UNKNOWN and info.get("kind") in LanguageModel.Kind.values:
        changes["kind"] = info["kind"]
    if model.parameter_count is None and isinstance(info.get("n_params"), int):
        changes["parameter_count"] = info["n_params"]
    if changes:
        LanguageModel.objects.filter(pk=model.pk).update(**changes)
