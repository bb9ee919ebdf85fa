"""The form that asks for runs of models on suites."""

from __future__ import annotations

from typing import Any

from django import forms
from django.http import QueryDict

from evaluations.runs.forms import (
    InstanceOptions,
    RunModelCheckboxes,
    RunModelsField,
    WordProbabilityField,
)
from suites.models import Suite, Tag
from suites.syntaxgym.selectors import suites_with_tag


class SuitePickerSelect(InstanceOptions, forms.SelectMultiple):
    """A plain multi-select (what works without JavaScript) whose options carry each
    suite's tags, so that static/js/suite-picker.js can filter by name or tag."""

    def instance_option(self, option: dict[str, Any], instance: Any) -> None:
        option["attrs"]["data-tags"] = " ".join(t.name for t in instance.tags.all())


class EvaluationRequestForm(forms.Form):
    models = RunModelsField(
        widget=RunModelCheckboxes,
        help_text="One or more: each model is queued on every suite chosen.",
    )
    suites = forms.ModelMultipleChoiceField(
        # Archived suites take no new evaluations.
        queryset=Suite.objects.filter(archived_at__isnull=True)
        .order_by("name")
        .prefetch_related("tags"),
        required=False,
        to_field_name="name",
        widget=SuitePickerSelect(attrs={"size": 12, "data-suite-picker": ""}),
        help_text="Pick one or more suites (type to filter by name or tag), or a tag below.",
    )
    tag = forms.ModelChoiceField(
        queryset=Tag.objects.all(),
        required=False,
        to_field_name="name",
        empty_label="(no tag)",
        help_text="Every suite with this tag.",
    )
    word_probability = WordProbabilityField(
        tokens="Sum of token surprisals (the usual; ranked on the leaderboard)",
        corrected="Word-corrected sums (separate runs, not ranked)",
        label="Region sums",
        help_text="Word-corrected: each region's sum is corrected for the word boundary, "
        "for causal LMs whose tokenizer marks word starts (see the docs' evaluation page).",
    )

    def __init__(self, data: QueryDict | None = None, **kwargs: Any) -> None:
        # `model` (the query string's name, and this form's before it took several) is
        # read as `models`, so that older links and scripts keep working.
        if data is not None and "model" in data and "models" not in data:
            data = data.copy()
            data.setlist("models", data.getlist("model"))
        super().__init__(data, **kwargs)

    def clean(self) -> dict[str, Any]:
        # Form.clean() returns cleaned_data; the stubs allow None.
        super().clean()
        cleaned = self.cleaned_data
        suites = suites_with_tag(cleaned.get("suites") or [], cleaned.get("tag"))
        if not suites and not self.errors:
            raise forms.ValidationError("Choose at least one suite or a tag that has suites.")
        cleaned["all_suites"] = suites
        return cleaned
