"""The language models a run can use (the catalog of models; see `registry`)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

# The source of a model registered only to hold imported results (NLPScholar
# predictions of a model too big for this site's workers): never queued on a worker.
IMPORTED_PREFIX = "imported:"


class LanguageModel(models.Model):
    """A language model that can be evaluated: a hub id, a local folder, or an n-gram
    model file (ARPA or CMU Sphinx binary)."""

    class Kind(models.TextChoices):
        CAUSAL = "causal", "causal (left-to-right)"
        MASKED = "masked", "masked (pseudo-log-likelihood)"
        NGRAM = "ngram", "n-gram (word back-off model)"
        UNKNOWN = "unknown", "not yet known"

    class Status(models.TextChoices):
        """Whether a worker may run it: an uploaded model is checked first (loaded, and
        one sentence scored); a model registered any other way is ready at once."""

        CHECKING = "checking", "checking"
        READY = "ready", "ready"
        REFUSED = "refused", "refused"

    # What a page reads to name a model with its badges (its template:
    # evaluations/language_models/_model_badges.html): the fields a list of runs loads with `.only()`,
    # as `model__<field>`.
    SHOWN_FIELDS = (
        "name",
        "display_name",
        "is_baseline",
        "is_hidden",
        "kind",
        "weights_removed_at",
        "status",
    )

    name = models.SlugField(max_length=100, unique=True, help_text="Short id used in URLs")
    display_name = models.CharField(max_length=200)
    source = models.CharField(
        max_length=500,
        help_text="Hugging Face hub id (e.g. gpt2), a local folder path, or an n-gram file path",
    )
    revision = models.CharField(max_length=100, blank=True, help_text="Hub revision (optional)")
    kind = models.CharField(max_length=10, choices=Kind.choices, default=Kind.UNKNOWN)
    parameter_count = models.BigIntegerField(null=True, blank=True)
    description = models.TextField(blank=True)
    reference_url = models.URLField(blank=True, max_length=500)
    is_baseline = models.BooleanField(
        default=False, help_text="A reference row such as the random-init baseline"
    )
    is_hidden = models.BooleanField(default=False, help_text="Hidden from leaderboards (staff)")
    # A training run's checkpoint whose folder its retention deleted: its results stay,
    # but no worker can load it any more.
    weights_removed_at = models.DateTimeField(null=True, blank=True)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.READY)
    reason = models.TextField(blank=True, help_text="Why its check refused it")
    # An uploaded model: the SHA-256 of the file sent, and where its files lie, relative to
    # the uploads folder (evaluations.language_models.uploads.uploaded_model_dir).
    content_hash = models.CharField(max_length=64, blank=True)
    upload_key = models.CharField(max_length=200, blank=True)
    # When its check was last handed to the task queue (None: not yet; the sweep sends it).
    check_sent_at = models.DateTimeField(null=True, blank=True)
    registered_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["display_name"]
        constraints = [
            models.UniqueConstraint(fields=["source", "revision"], name="model_unique_source"),
        ]

    def __str__(self) -> str:
        return self.display_name

    def get_absolute_url(self) -> str:
        return reverse("evaluations:model", args=[self.name])

    @property
    def is_imported(self) -> bool:
        """Registered only for imported results: no worker can load it."""
        return self.source.startswith(IMPORTED_PREFIX)

    @property
    def public_source(self) -> str:
        """The source without the server's folders (see model_sources.public_source)."""
        from evaluations.model_sources import public_source

        return public_source(
            self.source, model_dirs=[*settings.GYM_MODEL_DIRS, settings.VAR_DIR / "models"]
        )
