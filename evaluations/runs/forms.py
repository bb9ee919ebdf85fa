"""Form fields that every kind's request form shares: the language models to run, with
the ones that no worker can run shown but disabled, and the choice of token or
word-corrected surprisals."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django import forms

from evaluations.models import LanguageModel
from evaluations.runs import lifecycle as runs

# What a model that cannot run on a form says beside its name there.
IMPORTED_NOTE = "results imported, cannot run here"
WEIGHTS_REMOVED_NOTE = "weights removed, cannot run"
NGRAM_NOTE = "n-gram: no layers to probe"
NOT_READY_NOTES: dict[str, str] = {
    LanguageModel.Status.CHECKING: "being checked, cannot run yet",
    LanguageModel.Status.REFUSED: "refused by its check, cannot run",
}


def imported_note(model: LanguageModel) -> str:
    if model.weights_removed_at is not None:
        return WEIGHTS_REMOVED_NOTE
    if model.status != LanguageModel.Status.READY:
        return NOT_READY_NOTES[model.status]
    return IMPORTED_NOTE if model.is_imported else ""


def probing_note(model: LanguageModel) -> str:
    if model.kind == LanguageModel.Kind.NGRAM:
        return NGRAM_NOTE
    return imported_note(model)


class InstanceOptions(forms.widgets.ChoiceWidget):
    """Options of a model choice field, each shown by `instance_option` with the row it
    stands for (a widget of any kind's request form that says more about each choice)."""

    def create_option(
        self,
        name: str,
        value: Any,
        label: int | str,
        selected: bool,
        index: int,
        subindex: int | None = None,
        attrs: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        option = super().create_option(name, value, label, selected, index, subindex, attrs)
        instance = getattr(value, "instance", None)
        if instance is not None:
            self.instance_option(option, instance)
        return option

    def instance_option(self, option: dict[str, Any], instance: Any) -> None:
        """Change `option` (label, attrs) for `instance`."""


class RunModelOptions(InstanceOptions):
    """Options of a model choice whose models may be unable to run: each such option is
    disabled and says why (the field's `note`)."""

    note: Callable[[LanguageModel], str]

    def instance_option(self, option: dict[str, Any], instance: Any) -> None:
        note = self.note(instance)
        if note:
            option["label"] = f"{option['label']} ({note})"
            option["attrs"]["disabled"] = True


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
        select.note = note
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


class WordProbabilityField(forms.ChoiceField):
    """Token surprisals or word-corrected ones, as radio buttons, each choice saying
    what it means for the kind (`tokens`, `corrected`). Forms and links from before the
    option leave it out: 'tokens', the usual."""

    def __init__(self, *, tokens: str, corrected: str, **kwargs: Any) -> None:
        super().__init__(
            choices=[("tokens", tokens), ("corrected", corrected)],
            required=False,
            initial="tokens",
            widget=forms.RadioSelect,
            **kwargs,
        )

    def clean(self, value: Any) -> str:
        return super().clean(value) or "tokens"
