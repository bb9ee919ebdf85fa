"""Probing tasks: the task and its labelled sentences."""

from __future__ import annotations

from django.db import models

from suites.catalog_models import GymData, owner_field, tags_field


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
