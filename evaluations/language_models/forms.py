"""The form that registers a language model, or uploads one."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.template.defaultfilters import filesizeformat

from suites.formats.syntaxgym import DESCRIPTION_MAX_LENGTH


class ModelRegisterForm(forms.Form):
    file = forms.FileField(
        required=False,
        label="Model file",
        help_text="Upload a model instead of naming its source: a folder saved with "
        "save_pretrained (config.json, the tokenizer's files and the weights as "
        ".safetensors) packed as .tar, .tar.gz or .zip, or an n-gram model as an ARPA "
        "file, plain or gzipped. A worker checks it before it can run.",
    )
    source = forms.CharField(
        max_length=500,
        required=False,
        help_text="A Hugging Face hub id (gpt2, EleutherAI/pythia-160m; its kind is learnt "
        "on the first run), the path of a folder under the model folders saved with "
        "save_pretrained (a config.json and the tokenizer's files), or the path of an "
        "n-gram model file (ARPA, gzipped ARPA, CMU Sphinx .lm.bin or DMP).",
    )
    revision = forms.CharField(max_length=100, required=False, help_text="Hub revision (optional)")
    display_name = forms.CharField(max_length=200, required=False)
    name = forms.SlugField(
        max_length=100,
        required=False,
        help_text="Short id for URLs; made from the source (or the file's name) if empty",
    )
    description = forms.CharField(
        required=False, max_length=DESCRIPTION_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 3})
    )
    reference_url = forms.URLField(required=False, max_length=500, assume_scheme="https")
    hidden = forms.BooleanField(
        required=False,
        label="Hidden",
        help_text="An uploaded model only you and staff see, left off the leaderboards",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        limit = filesizeformat(settings.GYM_MAX_MODEL_UPLOAD_BYTES)
        self.fields["file"].help_text += f" Up to {limit}."

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        upload, source = data.get("file"), data.get("source", "")
        limit = settings.GYM_MAX_MODEL_UPLOAD_BYTES
        if upload is not None and upload.size is not None and upload.size > limit:
            self.add_error(
                "file",
                f"The file is {upload.size:,} bytes; the limit for models is {limit:,} "
                "bytes (GYM_MAX_MODEL_UPLOAD_BYTES).",
            )
        elif upload is not None and (source or data.get("revision")):
            self.add_error("source", "give a source or a model file, not both")
        elif upload is None and not source and "source" not in self.errors:
            self.add_error("source", "give a source, or upload a model file")
        return data
