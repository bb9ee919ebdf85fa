"""What the comparison APIs of suites and of minimal-pair sets answer alike: the row of
one compared model, the names left out and the paired test, as schema (and as data where
`evaluations.statistics.paired_test_data` does not already give it)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any, Protocol

from drf_spectacular.utils import OpenApiParameter, inline_serializer
from rest_framework import serializers

from evaluations.models import LanguageModel


class Compared(Protocol):
    """A compared model's run, a suite's (syntaxgym.comparisons.ComparedModel) or a
    minimal-pair set's (minimal_pairs.comparisons.ComparedRun): what both have, so
    that this module imports neither kind."""

    @property
    def letter(self) -> str: ...
    @property
    def model(self) -> LanguageModel: ...
    @property
    def evaluation_id(self) -> int: ...
    @property
    def accuracy(self) -> float | None: ...
    @property
    def interval(self) -> tuple[float, float] | None: ...


def models_parameter(description: str) -> OpenApiParameter:
    """The `models` query parameter of a comparison API: the names of the models to
    compare, and which are compared without it."""
    return OpenApiParameter("models", str, description=description)


def compared_fields(
    *, over: str, counts: Mapping[str, str | None] = MappingProxyType({})
) -> dict[str, serializers.Field]:
    """The schema of a compared model's row: the accuracy, `counts` (integer fields,
    name -> help text) and the accuracy's 95% Wilson interval `over` what it counts.
    The fields are made here, in that order, because a serializer lists its fields in
    the order they were made."""
    return {
        "letter": serializers.CharField(),
        "model": serializers.CharField(),
        "display_name": serializers.CharField(),
        "evaluation": serializers.IntegerField(),
        "accuracy": serializers.FloatField(allow_null=True),
        **{name: serializers.IntegerField(help_text=text) for name, text in counts.items()},
        "accuracy_interval": serializers.ListField(
            child=serializers.FloatField(),
            min_length=2,
            max_length=2,
            allow_null=True,
            help_text=f"95% Wilson interval [low, high] over {over}",
        ),
    }


def compared_data(m: Compared, **counts: int) -> dict[str, Any]:
    """A compared model's row as `compared_fields` describes it."""
    return {
        "letter": m.letter,
        "model": m.model.name,
        "display_name": m.model.display_name,
        "evaluation": m.evaluation_id,
        "accuracy": m.accuracy,
        **counts,
        "accuracy_interval": list(m.interval) if m.interval else None,
    }


def left_out_schema(component: str) -> serializers.Serializer:
    """The names asked for that were not compared, each with the reason."""
    return inline_serializer(
        component,
        {"name": serializers.CharField(), "reason": serializers.CharField()},
        many=True,
    )


def left_out_data(left_out: Iterable[tuple[str, str]]) -> list[dict[str, str]]:
    return [{"name": name, "reason": reason} for name, reason in left_out]


def paired_test_schema(
    component: str, *, counted: tuple[str, str], only_first: str, only_second: str, about: str
) -> serializers.Serializer:
    """What `paired_test_data` gives: `counted` is the name and help text of the count of
    items or pairs, `only_first` and `only_second` help texts, `about` the whole's."""
    name, counted_help = counted
    return inline_serializer(
        component,
        {
            "method": serializers.CharField(),
            name: serializers.IntegerField(help_text=counted_help),
            "only_first": serializers.IntegerField(help_text=only_first),
            "only_second": serializers.IntegerField(help_text=only_second),
            "both_pass": serializers.IntegerField(),
            "both_fail": serializers.IntegerField(),
            "p_value": serializers.FloatField(),
            "significant": serializers.BooleanField(help_text="p_value < 0.05"),
        },
        allow_null=True,
        help_text=about,
    )
