"""Pages of corpora: the list, the upload and one corpus's page."""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.core.files.uploadedfile import UploadedFile
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse

from gym.accounts import signed_in
from suites.catalog import (
    COMMON_SORT_LABELS,
    ListQuery,
    gym_data_or_404,
    list_context,
    upload_page,
)
from suites.corpora.models import Corpus
from suites.corpora.services import corpus_histogram, corpus_import, corpus_list, sample_lines
from suites.forms import NamedFileForm
from suites.models import Tag

CORPORA_PER_PAGE = 25


def corpus_name_from_file(file_name: str) -> str:
    """babylm-10M.train.tsv.gz -> babylm-10M.train"""
    name = file_name.replace("\\", "/").rsplit("/", 1)[-1].removesuffix(".gz")
    return name.removesuffix(".tsv").removesuffix(".txt") or "corpus"


class CorpusUploadForm(NamedFileForm):
    tagged = "corpus"
    field_order = ["file"]
    file = forms.FileField(
        label="Corpus file",
        help_text="NLPScholar's TSV with a 'text' column, or plain text with one sequence "
        "per line; either may be gzipped (.gz).",
    )
    tags = forms.CharField(required=False, help_text="Comma-separated, e.g. babylm, child-directed")
    validation_percent = forms.FloatField(
        label="Validation share (%)",
        initial=1.0,
        min_value=0.0,
        max_value=50.0,
        help_text="Lines held out for validation loss (at most 10,000), chosen by a seeded "
        "hash of the line number, so the same lines every time.",
    )

    def clean_file(self) -> UploadedFile:
        upload = self.cleaned_data["file"]
        if upload.size is not None and upload.size > settings.GYM_MAX_CORPUS_BYTES:
            raise forms.ValidationError(
                f"The file is {upload.size:,} bytes; the limit for corpora is "
                f"{settings.GYM_MAX_CORPUS_BYTES:,} bytes."
            )
        return upload


def corpus_list_page(request: HttpRequest) -> HttpResponse:
    query = ListQuery.from_page(request.GET)
    corpora = corpus_list(q=query.q, tag=query.tag, sort=query.sort)
    page = Paginator(corpora, CORPORA_PER_PAGE).get_page(request.GET.get("page"))
    sorts = [*COMMON_SORT_LABELS, ("words", "Most words")]
    return render(
        request,
        "suites/corpora/corpus_list.html",
        {
            **list_context(query, page=page, sorts=sorts, list_url=reverse("suites:corpora")),
            "all_tags": Tag.objects.filter(corpora__isnull=False).distinct(),
        },
    )


def corpus_detail(request: HttpRequest, name: str) -> HttpResponse:
    corpus = gym_data_or_404(Corpus, name, noun="corpus")
    return render(
        request,
        "suites/corpora/corpus_detail.html",
        {
            "corpus": corpus,
            "tags": list(corpus.tags.all()),
            "histogram": corpus_histogram(corpus),
            "sample": sample_lines(corpus.sample),
            "sample_chars": settings.GYM_SAMPLE_LINE_CHARS,
        },
    )


@login_required
def corpus_upload(request: HttpRequest) -> HttpResponse:
    form = CorpusUploadForm(request.POST or None, request.FILES or None)

    def save(upload: UploadedFile) -> tuple[str, str]:
        file_name = upload.name or ""
        corpus = corpus_import(
            source=upload,
            name=form.cleaned_data["name"].strip() or corpus_name_from_file(file_name),
            owner=signed_in(request.user),
            file_name=file_name,
            description=form.cleaned_data["description"],
            tags=form.cleaned_data["tags"],
            validation_fraction=form.cleaned_data["validation_percent"] / 100.0,
        )
        message = (
            f"Imported “{corpus.name}”: {corpus.line_count:,} lines, {corpus.word_count:,} words."
        )
        return message, corpus.get_absolute_url()

    return upload_page(
        request,
        form,
        template="suites/corpora/corpus_upload.html",
        max_bytes=settings.GYM_MAX_CORPUS_BYTES,
        save=save,
        limits={"line_bytes": settings.GYM_MAX_CORPUS_LINE_BYTES},
    )
