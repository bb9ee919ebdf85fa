from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms
from django.http import QueryDict

from evaluations.models import LanguageModel, ProbingRun
from evaluations.runs import lifecycle as runs
from suites.models import MinimalPairSet, ProbingTask, Suite, Tag
from suites.syntaxgym.selectors import suites_with_tag


class ModelRegisterForm(forms.Form):
    source = forms.CharField(
        max_length=500,
        help_text="A Hugging Face hub id (gpt2, EleutherAI/pythia-160m; its kind is learnt "
        "on the first run), the path of a folder under the model folders saved with "
        "save_pretrained (a config.json and the tokenizer's files), or the path of an "
        "n-gram model file (ARPA, gzipped ARPA, CMU Sphinx .lm.bin or DMP).",
    )
    revision = forms.CharField(max_length=100, required=False, help_text="Hub revision (optional)")
    display_name = forms.CharField(max_length=200, required=False)
    name = forms.SlugField(
        max_length=100, required=False, help_text="Short id for URLs; made from the source if empty"
    )
    description = forms.CharField(required=False, widget=forms.Textarea(attrs={"rows": 3}))
    reference_url = forms.URLField(required=False, max_length=500, assume_scheme="https")


class SuitePickerSelect(forms.SelectMultiple):
    """A plain multi-select (what works without JavaScript) whose options carry each
    suite's tags, so that static/js/suite-picker.js can filter by name or tag."""

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):  # type: ignore[no-untyped-def]
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        suite = getattr(value, "instance", None)
        if suite is not None:
            option["attrs"]["data-tags"] = " ".join(t.name for t in suite.tags.all())
        return option


# What a model that cannot run on a form says beside its name there.
IMPORTED_NOTE = "results imported, cannot run here"
NGRAM_NOTE = "n-gram: no layers to probe"


def imported_note(model: LanguageModel) -> str:
    return IMPORTED_NOTE if model.is_imported else ""


def probing_note(model: LanguageModel) -> str:
    if model.kind == LanguageModel.Kind.NGRAM:
        return NGRAM_NOTE
    return imported_note(model)


class RunModelOptions:
    """Options of a model choice whose models may be unable to run: each such option is
    disabled and says why (the field's `note`)."""

    def create_option(self, name, value, label, selected, index, subindex=None, attrs=None):  # type: ignore[no-untyped-def]
        option = super().create_option(name, value, label, selected, index, subindex, attrs)  # type: ignore[misc]
        model = getattr(value, "instance", None)
        note = self.note(model) if model is not None else ""  # type: ignore[attr-defined]
        if note:
            option["label"] = f"{label} ({note})"
            option["attrs"]["disabled"] = True
        return option


class RunModelSelect(RunModelOptions, forms.SelectMultiple):
    pass


class RunModelCheckboxes(RunModelOptions, forms.CheckboxSelectMultiple):
    pass


class RunModelsField(forms.ModelMultipleChoiceField):
    """The models a run form queues: every shown model, those that cannot run here
    listed but disabled with the reason (`note`). Choosing one anyway (a crafted post, or
    a model whose source changed since the page was shown) is this field's error, with
    the message the API gives, so that the form comes back with what was picked."""

    def __init__(
        self,
        *,
        widget: type[RunModelOptions] = RunModelSelect,
        widget_attrs: dict[str, Any] | None = None,
        note: Callable[[LanguageModel], str] = imported_note,
        **kwargs: Any,
    ) -> None:
        select = widget(attrs=widget_attrs)
        select.note = note  # type: ignore[attr-defined]
        super().__init__(
            queryset=LanguageModel.objects.filter(is_hidden=False),
            to_field_name="name",
            widget=select,
            **kwargs,
        )

    def clean(self, value: Any) -> Any:
        models = super().clean(value)
        try:
            runs.check_runnable(list(models))
        except runs.ModelNotRunnable as refused:
            raise forms.ValidationError(str(refused), code="not_runnable") from None
        return models


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

    def __init__(self, data: QueryDict | None = None, **kwargs: Any) -> None:
        # `model` (the query string's name, and this form's before it took several) is
        # read as `models`, so that older links and scripts keep working.
        if data is not None and "model" in data and "models" not in data:
            data = data.copy()
            data.setlist("models", data.getlist("model"))
        super().__init__(data, **kwargs)

    def clean(self) -> dict:
        cleaned = super().clean()
        suites = suites_with_tag(cleaned.get("suites") or [], cleaned.get("tag"))
        if not suites and not self.errors:
            raise forms.ValidationError("Choose at least one suite or a tag that has suites.")
        cleaned["all_suites"] = suites
        return cleaned


class ProbingRunRequestForm(forms.Form):
    task = forms.ModelChoiceField(queryset=ProbingTask.objects.all(), to_field_name="name")
    models = RunModelsField(
        widget_attrs={"size": 6},
        note=probing_note,
        help_text="One run per model. n-gram models have no layers to probe.",
    )
    pooling = forms.ChoiceField(
        choices=ProbingRun.Pooling.choices,
        initial=ProbingRun.Pooling.MEAN,
        help_text="A sentence's vector at each layer: the mean over its tokens, or (causal "
        "models) its last token's state.",
    )
    probe = forms.ChoiceField(
        choices=ProbingRun.Probe.choices,
        initial=ProbingRun.Probe.LOGREG,
        help_text="Trained per layer; hyperparameters chosen on va, accuracy reported on te.",
    )


class PairRequestForm(forms.Form):
    models = RunModelsField(
        widget_attrs={"size": 6},
        help_text="One run per model and set; a run asked for before on the same content is "
        "shown instead of run again.",
    )
    pair_sets = forms.ModelMultipleChoiceField(
        queryset=MinimalPairSet.objects.order_by("name"),
        to_field_name="name",
        label="Minimal-pair sets",
        widget=forms.SelectMultiple(attrs={"size": 8}),
    )


class PredictionsImportForm(forms.Form):
    file = forms.FileField(
        label="Predictions TSV",
        help_text="NLPScholar's evaluate output: token, sentid, word, wordpos, model, "
        "tokenizer, punctuation, prob, surp. Its words are taken as given.",
    )
    model = forms.CharField(
        max_length=100, help_text="The short name of the model whose predictions these are."
    )
    register = forms.BooleanField(
        required=False,
        label="Register it by name if there is no such model",
        help_text="A model registered only for imported results: it is never run here.",
    )
    display_name = forms.CharField(max_length=200, required=False)
    file_model = forms.CharField(
        max_length=200,
        required=False,
        label="Model in the file",
        help_text="Only for a file with predictions of several models: the one to import.",
    )
