from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Self

from django.conf import settings
from django.db import models
from django.urls import reverse
from django.utils import timezone

from suites.models import Suite

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

    # What a page reads to name a model with its badges (_model_badges.html): the fields
    # a list of runs loads with `.only()`, as `model__<field>`.
    SHOWN_FIELDS = (
        "name",
        "display_name",
        "is_baseline",
        "is_hidden",
        "kind",
        "weights_removed_at",
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


class Evaluation(Run):
    """One model on one suite's content (identified by its content hash)."""

    benchmark_field = "suite"

    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="evaluations")
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="evaluations")
    content_hash = models.CharField(max_length=64)
    metric = models.CharField(max_length=10, default="sum")
    accuracy = models.FloatField(null=True, blank=True)
    # Strict comparisons (< or >) whose two sides were exactly equal: each failed, as in
    # SyntaxGym. n-gram models tie often; the accuracy with ties broken at random says
    # how much they cost.
    ties = models.PositiveIntegerField(default=0)
    accuracy_random_ties = models.FloatField(null=True, blank=True)
    diagnostics = models.JSONField(default=dict, blank=True)
    model_info = models.JSONField(default=dict, blank=True)
    # What a region's `sum` is: "tokens", the sum of its token surprisals (every result
    # before this option, and the only one the leaderboard and the pages that compare
    # models read), or "corrected" for the word boundary (evaluations.scoring.boundary).
    word_probability = models.CharField(
        max_length=10,
        choices=[("tokens", "sum of token surprisals"), ("corrected", "word-corrected")],
        default="tokens",
    )
    # Which delivery of the current attempt is storing the results (a random token; empty
    # when none is). On SQLite a large store is written in several transactions
    # (`services.results_store`): a delivery claims the store with a conditional update,
    # and each of its transactions writes only while its claim holds, so that two
    # deliveries of one attempt never both write and a later one takes over from one
    # that died half way.
    store_claim = models.CharField(max_length=32, blank=True, default="")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "suite", "content_hash", "word_probability"],
                name="evaluation_unique_content",
            ),
        ]
        indexes = [
            models.Index(fields=["status"]),
            # Covers the leaderboard's one query over all evaluations.
            models.Index(
                fields=["status", "suite", "model", "content_hash", "accuracy", "ties"],
                name="evaluation_board",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} on {self.suite} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("evaluations:detail", args=[self.pk])

    @property
    def snapshot(self) -> dict[str, Any]:
        """The suite as it was evaluated (its `EvaluationSnapshot`): one query, unless
        the evaluation was read with `select_related("snapshot_row")`."""
        return self.snapshot_row.content


class EvaluationSnapshot(models.Model):
    """The suite as an evaluation evaluated it, so results of outdated content stay
    readable. A table of its own, not a column of the evaluation: the evaluation's row is
    updated at every progress report, and SQLite reads a row whole to update it (and
    rewrites it whole when its size changes), 36 MB at 100,000 items. Written once, with
    the evaluation (`evaluations.syntaxgym.services.evaluation_create`)."""

    evaluation = models.OneToOneField(
        Evaluation, on_delete=models.CASCADE, primary_key=True, related_name="snapshot_row"
    )
    content = models.JSONField()


class PredictionResult(models.Model):
    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, related_name="prediction_results"
    )
    position = models.PositiveIntegerField()
    formula = models.TextField()
    accuracy = models.FloatField(null=True)
    passed = models.PositiveIntegerField(default=0)
    evaluated = models.PositiveIntegerField(default=0)
    ties = models.PositiveIntegerField(default=0)

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "position"], name="prediction_result_unique"
            ),
        ]


# The item rows a reader may show: those of done runs. On SQLite a large store writes its
# rows in several transactions before the run becomes done in the last one
# (`evaluations.syntaxgym.services.results_store`), so a run that is not done may have
# some of its rows (or a retried run some of its old ones) for a while.
ITEM_ROWS_SHOWN = models.Q(evaluation__status="done")


class ItemResult(models.Model):
    """Region values and prediction outcomes of one item (one row per item keeps storing
    a 1,000-item suite at 1,000 rows)."""

    evaluation = models.ForeignKey(
        Evaluation, on_delete=models.CASCADE, related_name="item_results"
    )
    item_number = models.IntegerField()
    position = models.PositiveIntegerField()
    # {condition: {"sum": [v per region], "mean": [...], ...}}; None where a value is missing
    values = models.JSONField()
    # One entry per prediction: True, False, or None (not evaluable: a missing value).
    outcomes = models.JSONField()
    passed = models.BooleanField(null=True)
    # {condition: packed tokens (evaluations.token_data: parallel arrays of token texts,
    # character offsets and surprisals in bits)}; None for evaluations stored before
    # token surprisals were kept.
    tokens = models.JSONField(null=True, blank=True)

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "item_number"], name="item_result_unique"
            ),
        ]


class ProbingRun(Run):
    """One model's layers probed on one probing task's content, with one pooling and one
    probe. The per-layer accuracies are `ProbingLayerResult` rows; the best layer (chosen
    on va) and its te confusion matrix are kept here for the leaderboard and pages."""

    benchmark_field = "task"

    class Pooling(models.TextChoices):
        MEAN = "mean", "mean of the sentence's tokens"
        LAST = "last", "last token (causal models)"

    class Probe(models.TextChoices):
        LOGREG = "logreg", "logistic regression"
        MLP = "mlp", "MLP (one hidden layer)"

    model = models.ForeignKey(LanguageModel, on_delete=models.CASCADE, related_name="probing_runs")
    task = models.ForeignKey("suites.ProbingTask", on_delete=models.CASCADE, related_name="runs")
    content_hash = models.CharField(max_length=64)
    pooling = models.CharField(max_length=10, choices=Pooling.choices, default=Pooling.MEAN)
    probe = models.CharField(max_length=10, choices=Probe.choices, default=Probe.LOGREG)
    # Probes trained per layer, each with its own seed (runs stored before seeds: one).
    seeds = models.PositiveSmallIntegerField(default=1)
    # Whether the online code (MDL) was computed at each layer.
    mdl = models.BooleanField(default=False)
    # The frequency baseline's unigram counts come from this corpus; None: the CMU
    # trigram's unigrams (the default).
    frequency_corpus = models.ForeignKey(
        "suites.Corpus",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="probing_runs",
    )
    best_layer = models.PositiveSmallIntegerField(null=True, blank=True)
    best_va = models.FloatField(null=True, blank=True)
    best_te = models.FloatField(null=True, blank=True)
    # te accuracy minus the control task's, at the best layer (None: no control, or older)
    best_selectivity = models.FloatField(null=True, blank=True)
    # {"majority": {"label", "va_accuracy", "te_accuracy"}, "length": {...},
    #  "frequency": {...}, "chance", "applicable": {...}}
    baselines = models.JSONField(default=dict, blank=True)
    # te at the best layer: {"labels": [...], "matrix": [[...]]} (rows true, columns predicted)
    confusion = models.JSONField(default=dict, blank=True)
    # The task as probed: name, type, labels, counts per partition and label.
    task_info = models.JSONField(default=dict, blank=True)
    diagnostics = models.JSONField(default=dict, blank=True)
    model_info = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # NULLs are distinct in a unique index: a CMU run (no corpus) has its own.
            models.UniqueConstraint(
                fields=["model", "task", "content_hash", "pooling", "probe", "seeds", "mdl"],
                condition=models.Q(frequency_corpus__isnull=True),
                name="probing_run_unique_options",
            ),
            models.UniqueConstraint(
                fields=[
                    "model",
                    "task",
                    "content_hash",
                    "pooling",
                    "probe",
                    "seeds",
                    "mdl",
                    "frequency_corpus",
                ],
                condition=models.Q(frequency_corpus__isnull=False),
                name="probing_run_unique_options_corpus",
            ),
        ]
        indexes = [models.Index(fields=["status", "task", "model"], name="probing_run_board")]

    def __str__(self) -> str:
        return f"{self.model} on {self.task} ({self.pooling}, {self.probe}; {self.status})"

    def get_absolute_url(self) -> str:
        return reverse("evaluations:probing_run", args=[self.pk])

    @property
    def frequency_source(self) -> str:
        """Which unigram counts the frequency baseline uses, as pages and exports say it."""
        from evaluations.probing.controls import CMU_SOURCE, corpus_source_name

        corpus = self.frequency_corpus
        if corpus is None:
            return CMU_SOURCE
        return corpus_source_name(corpus.name, corpus.word_count)

    @property
    def progress_text(self) -> str:
        """Where the run is: sentences while vectors are extracted, then layers probed
        (progress counts both, sentences first: see evaluations.probing.worker)."""
        done, total = self.progress_done, self.progress_total
        sentences = self.diagnostics.get("sentences") or self.task.instance_count
        if self.status == self.Status.DONE:
            return f"{sentences:,} sentences, {max(total - sentences, 0)} layers"
        if done < sentences or total <= sentences:
            return f"vectors: {min(done, sentences):,} of {sentences:,} sentences"
        return f"probes: {done - sentences} of {total - sentences} layers"


class ProbingLayerResult(models.Model):
    """One layer's probe: accuracy on va (where hyperparameters are chosen) and on te.
    Layer 0 is the embedding output."""

    run = models.ForeignKey(ProbingRun, on_delete=models.CASCADE, related_name="layers")
    layer = models.PositiveSmallIntegerField()
    va_accuracy = models.FloatField()
    te_accuracy = models.FloatField()
    hyperparameters = models.JSONField(default=dict, blank=True)
    # Seeds' spread, the control task and selectivity, the online code: see
    # evaluations.probing.run (empty for runs stored before them).
    stats = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["run", "layer"]
        constraints = [
            models.UniqueConstraint(fields=["run", "layer"], name="probing_layer_unique"),
        ]


class ProbingAnnotation(models.Model):
    """One person's answer for one te sentence of a probing task, given without seeing
    its label: human accuracy, the reference SentEval's README asks for on tasks such as
    odd_man_out. A replaced task's instances go, and their answers with them."""

    instance = models.ForeignKey(
        "suites.ProbingInstance", on_delete=models.CASCADE, related_name="annotations"
    )
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="probing_annotations"
    )
    label = models.CharField(max_length=200)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["instance", "user"], name="probing_annotation_once"),
        ]


class PairEvaluation(Run):
    """One model on one minimal-pair set's content (identified by its content hash):
    scored by a worker, or imported from an NLPScholar predictions TSV. Token surprisals
    live in `PairSentenceTokens`; the analysis tables are recomputed from them with the
    options a page asks for, and `accuracy` / `ties` hold the default options' result."""

    benchmark_field = "pair_set"

    class Origin(models.TextChoices):
        WORKER = "worker", "scored by a worker"
        IMPORTED = "imported", "imported NLPScholar predictions"

    model = models.ForeignKey(
        LanguageModel, on_delete=models.CASCADE, related_name="pair_evaluations"
    )
    pair_set = models.ForeignKey(
        "suites.MinimalPairSet", on_delete=models.CASCADE, related_name="evaluations"
    )
    content_hash = models.CharField(max_length=64)
    origin = models.CharField(max_length=10, choices=Origin.choices, default=Origin.WORKER)
    # Share of pairs whose expected sentence is more predictable, under DEFAULT_OPTIONS
    # of evaluations.minimal_pairs.results; ties (equally predictable) count as failures.
    accuracy = models.FloatField(null=True, blank=True)
    ties = models.PositiveIntegerField(default=0)
    diagnostics = models.JSONField(default=dict, blank=True)
    model_info = models.JSONField(default=dict, blank=True)
    # What a token's surprisal is: "tokens" (every run before this option, imported ones,
    # and the only ones the leaderboard and the comparisons read), or "corrected": each
    # word's last token also carries its word-boundary correction, so that word and ROI
    # sums are word surprisals (evaluations.minimal_pairs.evaluate.word_corrections).
    word_probability = models.CharField(
        max_length=10,
        choices=[("tokens", "sum of token surprisals"), ("corrected", "word-corrected")],
        default="tokens",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["model", "pair_set", "content_hash", "word_probability"],
                name="pair_evaluation_unique_content",
            ),
        ]
        indexes = [
            models.Index(fields=["status"], name="pair_evaluation_status"),
            models.Index(
                fields=["status", "pair_set", "model", "content_hash", "accuracy", "ties"],
                name="pair_evaluation_board",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.model} on {self.pair_set} ({self.status})"

    def get_absolute_url(self) -> str:
        return reverse("evaluations:pair_result", args=[self.pk])


class PairSentenceTokens(models.Model):
    """The tokens of one sentence of a minimal-pair evaluation, packed
    (`evaluations.token_data`): one row per sentence keeps a 134,000-sentence set at
    134,000 rows, not millions."""

    evaluation = models.ForeignKey(
        PairEvaluation, on_delete=models.CASCADE, related_name="sentence_tokens"
    )
    position = models.PositiveIntegerField()
    sentid = models.CharField(max_length=200)
    tokens = models.JSONField()

    class Meta:
        ordering = ["evaluation", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["evaluation", "sentid"], name="pair_sentence_tokens_unique"
            ),
        ]


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


# Training runs live in their own package; imported here so that the app registers them.
from evaluations.training.models import TrainingRun  # noqa: E402, F401
