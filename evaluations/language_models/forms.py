"""The form that registers a language model."""

from __future__ import annotations

from django import forms

from suites.formats.syntaxgym import DESCRIPTION_MAX_LENGTH


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
    description = forms.CharField(
        required=False, max_length=DESCRIPTION_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 3})
    )
    reference_url = forms.URLField(required=False, max_length=500, assume_scheme="https")
