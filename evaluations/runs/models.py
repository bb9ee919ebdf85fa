"""What every kind of run shares: the abstract `Run` each kind's model extends, and the
parts of a run split across several work tasks."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Self

from django.conf import settings
from django.db import models
from django.utils import timezone

from evaluations.language_models.models import LanguageModel
from evaluations.subsets import subset_text


def word_probability_field() -> models.CharField:
    """A run's `word_probability`: what its token surprisals are, "tokens" (as scored) or
    "corrected" (each word's last token also carries its word-boundary correction). Every
    kind that scores words declares it with this field."""
    return models.CharField(
        max_length=10,
        choices=[("tokens", "sum of token surprisals"), ("corrected", "word-corrected")],
        default="tokens",
    )


class Run(models.Model):
    """What every kind of run shares: one model on one benchmark's content, worked on a
    GPU worker, stored next to the database. Subclasses add the benchmark, the results
    and `benchmark_owner`; `evaluations.runs.lifecycle` holds the lifecycle that moves them.

    Status only moves forward: queued -> running -> done, or to failed / cancelled from
    queued or running. A retry is the one way back (failed or cancelled -> queued), and it
    increments `attempt`: every message carries the attempt it was sent for, so a late
    message of an earlier attempt changes nothing."""

    class Status(models.TextChoices):
        QUEUED = "queued"
        RUNNING = "running"
        DONE = "done"
        FAILED = "failed"
        CANCELLED = "cancelled"

    FINISHED = (Status.DONE, Status.FAILED, Status.CANCELLED)

    status = models.CharField(max_length=10, choices=Status.choices, default=Status.QUEUED)
    # Whether the GPU task reached the broker; False after a broker outage, until the
    # sweep (or asking again) sends it.
    enqueued = models.BooleanField(default=False)
    attempt = models.PositiveIntegerField(default=1)
    progress_done = models.PositiveIntegerField(default=0)
    progress_total = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    # Failed because the artifact store could not be reached (the reason says so): the
    # sweep sends it again, as a new attempt, once the store answers, at most
    # GYM_STORE_OUTAGE_RESENDS times in all (`store_resends` counts them).
    waiting_for_store = models.BooleanField(default=False)
    store_resends = models.PositiveSmallIntegerField(default=0)
    requested_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL
    )
    created_at = models.DateTimeField(auto_now_add=True)
    # When the current attempt was queued: the sweep re-sends a run that is still not
    # sent a while after this.
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        abstract = True

    @property
    def finished(self) -> bool:
        return self.status in self.FINISHED

    @property
    def waiting_for_broker(self) -> bool:
        return self.status == self.Status.QUEUED and not self.enqueued

    # The name of the subclass's foreign key to its benchmark (a GymData: suite,
    # minimal-pair set or probing task); each subclass has a `content_hash` of it too.
    benchmark_field: ClassVar[str]
    # What every subclass declares, typed here (no value: Django sees no field) for the
    # code that handles runs of any kind.
    objects: ClassVar[models.Manager[Self]]
    model: LanguageModel
    content_hash: str

    if TYPE_CHECKING:

        def get_absolute_url(self) -> str: ...

    @property
    def benchmark(self) -> Any:
        return getattr(self, self.benchmark_field)

    @property
    def outdated(self) -> bool:
        """Run on content the benchmark no longer has."""
        return self.content_hash != self.benchmark.content_hash

    def benchmark_owner(self) -> Any:
        """The user who owns the benchmark this run is on (None for nobody)."""
        return self.benchmark.owner

    def may_manage(self, user: Any) -> bool:
        """Cancel and retry: the benchmark's owner, the requester, or staff."""
        if user is None or not user.is_authenticated:
            return False
        if user.is_staff:
            return True
        return user.pk in {self.requested_by_id, getattr(self.benchmark_owner(), "pk", None)}


class Sampled(models.Model):
    """A run that may be on a fixed, seeded sample of its benchmark (the fast subset for
    sweeps, `evaluations.subsets`): part of the run's identity, so a run on a subset and
    the run on the whole benchmark are separate rows, and boards never rank the two
    together. Suite, minimal-pair and probing runs are."""

    # 0: the whole benchmark. Otherwise the items kept (a probing task's te sentences),
    # drawn with `subset_seed`, out of `subset_total`.
    subset_size = models.PositiveIntegerField(default=0)
    subset_seed = models.PositiveIntegerField(default=0)
    subset_total = models.PositiveIntegerField(default=0)

    # What the subset counts, as pages say it.
    subset_noun: ClassVar[str] = "items"

    class Meta:
        abstract = True

    @property
    def is_subset(self) -> bool:
        return self.subset_size > 0

    @property
    def subset_label(self) -> str:
        """ "subset: 200 of 1,000 items, seed 0", or "" for a run on the whole benchmark."""
        if not self.is_subset:
            return ""
        return subset_text(self.subset_size, self.subset_total, self.subset_seed, self.subset_noun)


def run_identity(*fields: str) -> list[str]:
    """The fields of a sampled run kind's unique constraint: the model, the kind's own
    `fields` (its benchmark, the content hash, the options that change its results), then
    the subset (`Sampled`), so that a run on a sample never stands for the whole one."""
    return ["model", *fields, "subset_size", "subset_seed"]


class RunPart(models.Model):
    """One part of a run whose sentences were split across several work tasks (see
    `evaluations.runs.packing`): its progress while it is worked on, then its results until
    the run's last part arrives and the run is stored as a whole. Any kind of run: the
    kind's name and the run's id identify it. Rows are deleted once the run is stored,
    or when it is retried."""

    kind = models.CharField(max_length=40)
    run_id = models.PositiveBigIntegerField()
    attempt = models.PositiveIntegerField()
    # Which of how many parts; a plan with another count (the budget changed between two
    # sends of the same attempt) is a separate set of parts.
    count = models.PositiveIntegerField()
    index = models.PositiveIntegerField()
    size = models.PositiveIntegerField(help_text="Sentences in this part")
    done = models.PositiveIntegerField(default=0)
    # The worker's results for this part's sentences; null until stored.
    results = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["kind", "run_id", "attempt", "count", "index"], name="run_part_unique"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.kind} run {self.run_id} part {self.index + 1}/{self.count}"
