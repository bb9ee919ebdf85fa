"""Minimal-pair sets: the set, its sentences and its replaced contents."""

from __future__ import annotations

from django.db import models

from suites.catalog_models import GymData, owner_field, tags_field


class MinimalPairSet(GymData):
    """A minimal-pair set (NLPScholar data TSV or BLiMP JSONL). Owner, name, tags,
    description and content hash work as for suites; sentences live in
    `PairSetSentence` rows written in bulk."""

    url_name = "suites:pair_set"

    owner = owner_field("pair_sets")
    tags = tags_field("pair_sets")
    source_format = models.CharField(max_length=40, blank=True)
    # The metric its runs take when a request names none (suites.minimal_pairs.sets.
    # format_metric: what the format's publishers report); sets from before it: nlpscholar.
    metric = models.CharField(max_length=12, default="nlpscholar")
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
