"""Minimal-pair evaluations: one model on one minimal-pair set, and its tokens."""

from __future__ import annotations

from django.db import models
from django.urls import reverse

from evaluations.language_models.models import LanguageModel
from evaluations.runs.models import Run, Sampled, run_identity, word_probability_field


class PairEvaluation(Run, Sampled):
    """One model on one minimal-pair set's content (identified by its content hash):
    scored by a worker, or imported from an NLPScholar predictions TSV. Token surprisals
    live in `PairSentenceTokens`; the analysis tables are recomputed from them with the
    options a page asks for, and `accuracy` / `ties` hold the default options' result."""

    benchmark_field = "pair_set"
    subset_noun = "pairs"

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
    word_probability = word_probability_field()

    # How pairs are compared (evaluations.minimal_pairs.analysis.METRICS): the stored
    # accuracy's metric. A request without one takes the set's (MinimalPairSet.metric).
    # Runs before this field were all NLPScholar's analysis (the migration says so).
    metric = models.CharField(
        max_length=12,
        choices=[
            ("sentence", "whole-sentence log probability"),
            ("nlpscholar", "NLPScholar's analysis"),
            ("lm_eval", "whole-sentence, as lm-evaluation-harness"),
        ],
        default="nlpscholar",
    )

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=run_identity("pair_set", "content_hash", "word_probability", "metric"),
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
