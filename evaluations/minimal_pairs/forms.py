"""The forms that ask for minimal-pair runs and import predictions scored elsewhere."""

from __future__ import annotations

from django import forms

from evaluations.runs.forms import RunModelsField, WordProbabilityField
from suites.models import MinimalPairSet


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
    word_probability = WordProbabilityField(
        tokens="Token surprisals (the usual; ranked on the leaderboard)",
        corrected="Word-corrected surprisals (separate runs, not ranked)",
        label="Word probabilities",
        help_text="Word-corrected: each word's last token also carries the word-boundary "
        "correction, so that a word's sum of token surprisals is its corrected surprisal "
        "(causal LMs whose tokenizer marks word starts; see the docs' evaluation page).",
    )

    metric = forms.ChoiceField(
        choices=[
            ("", "The set's own (from its format)"),
            ("sentence", "Whole-sentence log probability"),
            ("nlpscholar", "NLPScholar's analysis"),
            ("lm_eval", "As lm-evaluation-harness (a leading space after end-of-text)"),
        ],
        required=False,
        label="Metric",
        help_text="How pairs are compared. Runs of a metric other than the set's are "
        "separate runs, not ranked on the leaderboard (see the docs' minimal-pairs page).",
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
