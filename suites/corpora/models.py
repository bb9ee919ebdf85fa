from __future__ import annotations

from pathlib import Path

from django.conf import settings
from django.db import models

from suites.catalog_models import GymData, owner_field, tags_field


class Corpus(GymData):
    """Training text. The text is a file under GYM_CORPUS_DIR named by its content hash
    (the normalised text: one sequence per line), and in the artifact store under
    `artifact_key` for the workers of other machines, never rows; this row holds what pages
    show without reading it: counts, the length histogram, a sample and the held-out
    validation split (a seeded hash of the line number at or below `validation_threshold`)."""

    url_name = "suites:corpus"

    owner = owner_field("corpora")
    tags = tags_field("corpora")
    source_format = models.CharField(max_length=10)  # "tsv" or "text"
    gzipped = models.BooleanField(default=False)
    original_name = models.CharField(max_length=255, blank=True)
    file_name = models.CharField(max_length=100)  # under GYM_CORPUS_DIR
    bytes = models.BigIntegerField(default=0)  # of the normalised text
    line_count = models.BigIntegerField(default=0)
    word_count = models.BigIntegerField(default=0)
    char_count = models.BigIntegerField(default=0)
    blank_lines = models.BigIntegerField(default=0)
    # {"words": lines}; lengths above 256 words are counted under "256".
    length_counts = models.JSONField(default=dict)
    sample = models.JSONField(default=list)  # [[line, text], ...], a seeded sample
    validation_fraction = models.FloatField(default=0.01)
    validation_max = models.PositiveIntegerField(default=10_000)
    validation_seed = models.BigIntegerField(default=0)
    validation_threshold = models.BigIntegerField(default=-1)
    validation_lines = models.PositiveIntegerField(default=0)

    class Meta(GymData.Meta):
        app_label = "suites"
        verbose_name_plural = "corpora"

    @property
    def path(self) -> Path:
        return Path(settings.GYM_CORPUS_DIR) / self.file_name

    @property
    def artifact_key(self) -> str:
        """Its key in the artifact store (gym.artifacts): what a payload names, never
        the path, which is this host's."""
        return f"corpora/{self.content_hash}"

    @property
    def training_lines(self) -> int:
        return self.line_count - self.validation_lines
