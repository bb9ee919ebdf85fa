from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import models
from django.urls import reverse

from suites.formats.schema import prediction_metric

if TYPE_CHECKING:
    from django.contrib.auth.models import User
    from django.db.models.fields.related_descriptors import ManyRelatedManager


class Tag(models.Model):
    """A label such as a phenomenon or circuit ("agreement", "garden-path")."""

    name = models.SlugField(max_length=64, unique=True)
    description = models.TextField(blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse("suites:tag", args=[self.name])


def default_metric() -> str:
    return "sum"


def owner_field(related_name: str) -> models.ForeignKey[User | None, User | None]:
    """The owner of a suite, minimal-pair set or probing task. None: one shipped with the
    site (the examples); only staff may change those."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name=related_name,
    )


def tags_field(related_name: str) -> models.ManyToManyField:
    return models.ManyToManyField(Tag, blank=True, related_name=related_name)


class GymData(models.Model):
    """What the three kinds of test data (suites, minimal-pair sets, probing tasks) have
    alike: a unique name used in URLs, an owner, a description, tags, a content hash and
    timestamps. Each kind declares `owner = owner_field(...)` and `tags = tags_field(...)`
    with its own reverse name (user.suites, tag.pair_sets…) and `url_name`, its page."""

    url_name = ""
    # Declared by each kind (owner_field, tags_field), typed here (no value: Django sees
    # no field) for the code that handles any kind.
    owner_id: int | None
    if TYPE_CHECKING:
        tags: ManyRelatedManager[Tag, Any]

    name = models.CharField(max_length=200, unique=True)
    description = models.TextField(blank=True)
    content_hash = models.CharField(max_length=64, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return reverse(self.url_name, args=[self.name])


class Suite(GymData):
    """A test suite. Its items live in `Item` rows; regions, conditions and predictions
    in their own small tables so that pages and evaluations can read them cheaply."""

    url_name = "suites:detail"

    owner = owner_field("suites")
    reference = models.TextField(blank=True)
    author = models.CharField(max_length=500, blank=True)
    comment = models.TextField(blank=True)
    # "sum", "all" or a list of metric names, kept as uploaded.
    metric = models.JSONField(default=default_metric)
    # Meta keys Gym does not model, kept so that an export gives back what was uploaded.
    extra_meta = models.JSONField(default=dict, blank=True)
    tags = tags_field("suites")

    source_format = models.CharField(max_length=40, blank=True)
    import_warnings = models.JSONField(default=list, blank=True)

    region_count = models.PositiveIntegerField(default=0)
    condition_count = models.PositiveIntegerField(default=0)
    item_count = models.PositiveIntegerField(default=0)

    # Set when the owner deleted a suite that has results: it leaves every list, while
    # its page and its results (anyone's) stay reachable.
    archived_at = models.DateTimeField(null=True, blank=True)

    @property
    def prediction_metric(self) -> str:
        """The region metric the predictions compare ("sum" for "all")."""
        return prediction_metric(self.metric)

    @property
    def metric_label(self) -> str:
        """meta.metric as uploaded, a list as its names joined by commas."""
        if isinstance(self.metric, list):
            return ", ".join(str(m) for m in self.metric)
        return str(self.metric)


class Region(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="regions")
    number = models.PositiveIntegerField()
    name = models.CharField(max_length=200)

    class Meta:
        ordering = ["suite", "number"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "number"], name="region_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.number}: {self.name}"


class Condition(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="conditions")
    name = models.CharField(max_length=200)
    position = models.PositiveIntegerField()

    class Meta:
        ordering = ["suite", "position"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "name"], name="condition_unique_name"),
        ]

    def __str__(self) -> str:
        return self.name


class Prediction(models.Model):
    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="predictions")
    position = models.PositiveIntegerField()
    # Canonical printing of the formula (what exports write and evaluations use).
    formula = models.TextField()
    # The prediction as uploaded (formula text, or a 2019 relation object as JSON).
    original = models.TextField(blank=True)

    class Meta:
        ordering = ["suite", "position"]
        constraints = [
            models.UniqueConstraint(
                fields=["suite", "position"], name="prediction_unique_position"
            ),
        ]

    def __str__(self) -> str:
        return self.formula


class Item(models.Model):
    """One item: for each condition (in the suite's condition order) the region contents
    in region order. One row per item keeps a 1,000-item suite at 1,000 rows."""

    suite = models.ForeignKey(Suite, on_delete=models.CASCADE, related_name="items")
    item_number = models.IntegerField()
    position = models.PositiveIntegerField()
    # [{"condition_name": "...", "regions": ["content of region 1", ...]}, ...]
    conditions = models.JSONField()

    class Meta:
        ordering = ["suite", "position"]
        constraints = [
            models.UniqueConstraint(fields=["suite", "item_number"], name="item_unique_number"),
        ]

    def __str__(self) -> str:
        return f"{self.suite_id} item {self.item_number}"


class MinimalPairSet(GymData):
    """A minimal-pair set (NLPScholar data TSV or BLiMP JSONL). Owner, name, tags,
    description and content hash work as for suites; sentences live in
    `PairSetSentence` rows written in bulk."""

    url_name = "suites:pair_set"

    owner = owner_field("pair_sets")
    tags = tags_field("pair_sets")
    source_format = models.CharField(max_length=40, blank=True)
    # The TSV's columns in file order (export writes them back so) and which are conditions.
    columns = models.JSONField(default=list)
    condition_columns = models.JSONField(default=list)
    import_warnings = models.JSONField(default=list, blank=True)
    sentence_count = models.PositiveIntegerField(default=0)
    pair_count = models.PositiveIntegerField(default=0)


class PairSetSentence(models.Model):
    pair_set = models.ForeignKey(MinimalPairSet, on_delete=models.CASCADE, related_name="sentences")
    position = models.PositiveIntegerField()
    sentid = models.CharField(max_length=200)
    pairid = models.CharField(max_length=200, blank=True)
    # The pair's ordinal in first-seen order (None: no pairs), so that a page of pairs is
    # one indexed range query whatever the set's size.
    pair_index = models.PositiveIntegerField(null=True, blank=True)
    comparison = models.CharField(max_length=20, blank=True)
    sentence = models.TextField()
    roi = models.JSONField(null=True, blank=True)  # word positions; null: the whole sentence
    conditions = models.JSONField(default=dict)

    class Meta:
        ordering = ["pair_set", "position"]
        constraints = [
            models.UniqueConstraint(fields=["pair_set", "sentid"], name="pair_sentence_unique_id"),
        ]
        indexes = [models.Index(fields=["pair_set", "pair_index"], name="pair_sentence_pair")]

    def __str__(self) -> str:
        return f"{self.pair_set_id} {self.sentid}"


class PairSetVersion(models.Model):
    """A replaced content of a minimal-pair set, kept while runs on it exist: the
    sentence rows in the format layer's order, so that an outdated run's analysis reads
    the sentences it was scored on, not the set's current ones."""

    pair_set = models.ForeignKey(MinimalPairSet, on_delete=models.CASCADE, related_name="versions")
    content_hash = models.CharField(max_length=64)
    columns = models.JSONField(default=list)
    condition_columns = models.JSONField(default=list)
    source_format = models.CharField(max_length=40, blank=True)
    # [sentid, sentence, pairid, comparison, roi, conditions] per sentence, in order.
    sentences = models.JSONField(default=list)
    replaced_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["pair_set", "content_hash"], name="pair_set_version_unique_content"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.pair_set_id} {self.content_hash[:12]}"


class ProbingTask(GymData):
    """A classifier probing task (SentEval style): sentences with a label, split into
    tr/va/te. Its instances live in `ProbingInstance` rows; counts are kept here so that
    lists and pages never count 120,000 rows."""

    url_name = "suites:probing_detail"

    owner = owner_field("probing_tasks")
    tags = tags_field("probing_tasks")
    # One of suites.formats.probing.TASK_TYPES: a SentEval task or "custom".
    task_type = models.CharField(max_length=40)
    labels = models.JSONField(default=list)  # the tr labels, in order
    counts = models.JSONField(default=dict)  # {"tr": {"label": n, ...}, "va": ..., "te": ...}
    # {"label": {"words": n, ...}}: the sentence-length distribution per label, all partitions.
    length_counts = models.JSONField(default=dict)
    extra_columns = models.PositiveSmallIntegerField(default=0)
    instance_count = models.PositiveIntegerField(default=0)


class ProbingInstance(models.Model):
    PARTITIONS = [("tr", "training"), ("va", "validation"), ("te", "test")]

    task = models.ForeignKey(ProbingTask, on_delete=models.CASCADE, related_name="instances")
    line = models.PositiveIntegerField()  # line number in the uploaded file
    partition = models.CharField(max_length=2, choices=PARTITIONS)
    label = models.CharField(max_length=200)
    sentence = models.TextField()
    n_words = models.PositiveIntegerField()
    extra = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["task", "line"]
        constraints = [
            models.UniqueConstraint(fields=["task", "line"], name="probing_instance_unique_line"),
        ]
        indexes = [models.Index(fields=["task", "partition", "label"])]

    def __str__(self) -> str:
        return f"{self.task_id} line {self.line}"


# Corpora live in their own package; imported here so that the app registers the model.
from suites.corpora.models import Corpus  # noqa: E402, F401
