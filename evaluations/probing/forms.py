"""The form that asks for probing runs."""

from __future__ import annotations

from django import forms

from evaluations.models import ProbingRun
from evaluations.probing.controls import DEFAULT_SEEDS, MAX_SEEDS
from evaluations.runs.forms import RunModelsField, probing_note
from suites.corpora.models import Corpus
from suites.models import ProbingTask


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
    seeds = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_SEEDS,
        initial=DEFAULT_SEEDS,
        help_text="Probes per layer, each with its own seed: the page shows their mean and "
        "spread, and the layer is chosen on the mean va accuracy.",
    )
    mdl = forms.BooleanField(
        required=False,
        label="MDL (online code)",
        help_text="Also the description length of tr's labels at each layer (Voita and "
        "Titov 2020): about ten more probes per layer.",
    )

    frequency_corpus = forms.ModelChoiceField(
        queryset=Corpus.objects.all(),
        to_field_name="name",
        required=False,
        empty_label="CMU US English trigram unigrams (default)",
        label="Frequency source",
        help_text="Where the frequency baseline (tense and number tasks) counts the target "
        "forms: the CMU trigram's unigrams, or an uploaded corpus.",
        error_messages={
            "invalid_choice": "no corpus is named that: choose an uploaded corpus, or the "
            "CMU unigrams"
        },
    )

    def clean_seeds(self) -> int:
        """Left empty: the default number of seeds."""
        seeds = self.cleaned_data.get("seeds")
        return DEFAULT_SEEDS if seeds is None else seeds
