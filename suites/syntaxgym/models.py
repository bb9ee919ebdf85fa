"""Test suites: the suite and its regions, conditions, predictions and items."""

from __future__ import annotations

from django.db import models

from suites.catalog_models import GymData, owner_field, tags_field
from suites.formats.schema import prediction_metric


def default_metric() -> str:
    return "sum"


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
