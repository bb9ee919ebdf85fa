from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings
from django.core.files.uploadedfile import UploadedFile

from suites.catalog_services import NAME_MAX_LENGTH, tag_list_errors, tag_slugs
from suites.formats import pair_datasets
from suites.formats.probing import TASK_TYPES
from suites.formats.syntaxgym import (
    DESCRIPTION_MAX_LENGTH,
    META_TEXT_MAX_LENGTH,
    TAG_MAX_LENGTH,
    TAGS_MAX_COUNT,
)


def upload_size_check(upload: UploadedFile) -> None:
    """Refuse a file over the site's upload limit (every upload form applies it)."""
    if upload.size is not None and upload.size > settings.GYM_MAX_UPLOAD_BYTES:
        raise forms.ValidationError(
            f"The file is {upload.size:,} bytes; the limit is "
            f"{settings.GYM_MAX_UPLOAD_BYTES:,} bytes."
        )


class FileUploadForm(forms.Form):
    """A form whose `file` field is held to the site's upload limit."""

    def clean_file(self) -> UploadedFile:
        upload = self.cleaned_data["file"]
        upload_size_check(upload)
        return upload


class TaggedForm(forms.Form):
    """A form whose `tags` field is comma-separated tags, cleaned to the slugs stored;
    what they tag, `tagged`, is named in the errors."""

    tagged = "suite"

    def clean_tags(self) -> list[str]:
        return clean_tag_list(self.cleaned_data.get("tags", ""), noun=self.tagged)


class NamedFileForm(TaggedForm):
    """A file saved under a name of its own, else the file's, with a description and tags:
    the fields that the probing and corpus uploads share. Each kind adds its `file` (and
    its own fields), its `tags` with examples of its own, and a `field_order` that puts
    `file` first."""

    name = forms.CharField(
        max_length=NAME_MAX_LENGTH,
        required=False,
        help_text="Default: the file name without extension.",
    )
    description = forms.CharField(
        required=False, max_length=DESCRIPTION_MAX_LENGTH, widget=forms.Textarea(attrs={"rows": 3})
    )


class SuiteUploadForm(TaggedForm):
    file = forms.FileField(
        required=False,
        label="Suite file (JSON)",
        help_text="Any SyntaxGym format: current, 2020 bracket formulas, 2019 relations.",
    )
    text = forms.CharField(
        required=False,
        label="…or paste the JSON",
        widget=forms.Textarea(attrs={"rows": 10, "spellcheck": "false", "class": "mono"}),
    )

    tags = forms.CharField(
        required=False,
        max_length=TAGS_MAX_COUNT * (TAG_MAX_LENGTH + 2),
        help_text="Comma-separated, e.g. agreement, licensing; added to the tags the file "
        f"names (at most {TAGS_MAX_COUNT} in all, each at most {TAG_MAX_LENGTH} characters).",
    )
    rename = forms.BooleanField(
        required=False,
        label="If the name is taken, save it under the next free name",
        help_text="“name (2)”, “name (3)”, … as the import command's --on-conflict rename does.",
    )

    def __init__(self, *args: Any, new: bool = True, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if not new:
            # Replacing a suite keeps its name and tags.
            del self.fields["tags"], self.fields["rename"]

    def clean(self) -> dict[str, Any]:
        # Form.clean() returns cleaned_data; the stubs allow None.
        super().clean()
        cleaned = self.cleaned_data
        upload = cleaned.get("file")
        text = cleaned.get("text") or ""
        if upload and text.strip():
            raise forms.ValidationError("Give either a file or pasted text, not both.")
        if not upload and not text.strip():
            raise forms.ValidationError("Choose a JSON file or paste the suite's JSON.")
        if upload:
            upload_size_check(upload)
        return cleaned

    def source(self) -> bytes | str:
        upload = self.cleaned_data.get("file")
        if upload:
            return upload.read()
        return self.cleaned_data["text"]


_TEXT_MAX = META_TEXT_MAX_LENGTH


class SuiteMetaForm(TaggedForm):
    description = forms.CharField(
        required=False,
        max_length=_TEXT_MAX["description"],
        widget=forms.Textarea(attrs={"rows": 3}),
    )
    reference = forms.CharField(
        required=False, max_length=_TEXT_MAX["reference"], widget=forms.Textarea(attrs={"rows": 2})
    )
    author = forms.CharField(required=False, max_length=_TEXT_MAX["author"])
    comment = forms.CharField(
        required=False, max_length=_TEXT_MAX["comment"], widget=forms.Textarea(attrs={"rows": 3})
    )
    tags = forms.CharField(
        required=False,
        max_length=TAGS_MAX_COUNT * (TAG_MAX_LENGTH + 2),
        help_text="Comma-separated, e.g. agreement, licensing",
    )


class ProbingUploadForm(NamedFileForm, FileUploadForm):
    """A SentEval-style probing file with the task's name, type, description and tags."""

    tagged = "probing task"
    field_order = ["file", "name", "task_type"]
    file = forms.FileField(
        label="Probing file",
        help_text="One instance per line: partition (tr, va or te) TAB label TAB sentence.",
    )
    task_type = forms.ChoiceField(
        label="Type",
        required=False,
        choices=[("", "From the file name (e.g. past_present.txt), else custom")]
        + [(name, name) for name in TASK_TYPES],
    )
    tags = forms.CharField(required=False, help_text="Comma-separated, e.g. senteval, syntax")


class PairSetUploadForm(TaggedForm, FileUploadForm):
    """A minimal-pair file with the set's name, description and tags."""

    tagged = "minimal-pair set"

    file = forms.FileField(
        label="File",
        help_text="NLPScholar TSV, BLiMP-style JSON Lines or Parquet, CLAMS, Zorro, …",
    )
    file_format = forms.ChoiceField(
        label="Format",
        required=False,
        choices=pair_datasets.format_choices,
        help_text="Detected from the content unless you choose one.",
    )
    name = forms.CharField(label="Name", max_length=200)
    description = forms.CharField(
        label="Description",
        required=False,
        max_length=DESCRIPTION_MAX_LENGTH,
        widget=forms.Textarea,
    )
    tags = forms.CharField(label="Tags", required=False, help_text="comma-separated")
    drop_incomplete_pairs = forms.BooleanField(
        label="Leave out incomplete pairs",
        required=False,
        help_text="Pairs without both an expected and an unexpected sentence are left out "
        "with a warning (as NLPScholar does) instead of refusing the file.",
    )


def clean_tag_list(text: str, *, noun: str) -> list[str]:
    """Comma-separated tags as stored (slugs), within the limits of one item's tags."""
    slugs = tag_slugs(text.split(","))
    errors = tag_list_errors(slugs, where=("tags",), noun=noun)
    if errors:
        raise forms.ValidationError([e.message for e in errors])
    return slugs
