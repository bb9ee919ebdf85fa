"""Pages of probing tasks: the list (search, tags, type), upload, and one task's page."""

from __future__ import annotations

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
from suites.formats.probing import PARTITION_NAMES, PARTITIONS, TASK_TYPES, guess_task_type
from suites.forms import ProbingUploadForm
from suites.models import ProbingTask, Tag
from suites.probing.services import (
    probing_task_import,
    probing_task_list,
    probing_task_overview,
)

TASKS_PER_PAGE = 25
EXAMPLES_PER_PAGE = 50


def probing_list(request: HttpRequest) -> HttpResponse:
    query = ListQuery.from_page(request.GET)
    task_type = request.GET.get("type", "").strip()
    tasks = probing_task_list(q=query.q, tag=query.tag, task_type=task_type, sort=query.sort)
    page = Paginator(tasks, TASKS_PER_PAGE).get_page(request.GET.get("page"))
    sorts = [*COMMON_SORT_LABELS, ("instances", "Most instances")]
    return render(
        request,
        "suites/probing/probing_list.html",
        {
            **list_context(query, page=page, sorts=sorts, list_url=reverse("suites:probing_list")),
            "task_type": task_type,
            "types": TASK_TYPES,
            "all_tags": Tag.objects.filter(probing_tasks__isnull=False).distinct(),
        },
    )


def probing_detail(request: HttpRequest, name: str) -> HttpResponse:
    task = gym_data_or_404(ProbingTask, name, noun="probing task")
    partition = request.GET.get("partition", "")
    label = request.GET.get("label", "")
    examples = task.instances.only("line", "partition", "label", "sentence", "extra")
    if partition in PARTITIONS:
        examples = examples.filter(partition=partition)
    else:
        partition = ""
    if label:
        examples = examples.filter(label=label)
    page = Paginator(examples.order_by("line"), EXAMPLES_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "suites/probing/probing_detail.html",
        {
            "task": task,
            "tags": list(task.tags.all()),
            "overview": probing_task_overview(task),
            "page": page,
            "partition": partition,
            "label": label,
            "partitions": PARTITION_NAMES,
        },
    )


@login_required
def probing_upload(request: HttpRequest) -> HttpResponse:
    form = ProbingUploadForm(request.POST or None, request.FILES or None)

    def save(upload: UploadedFile) -> tuple[str, str]:
        file_name = upload.name or ""
        task = probing_task_import(
            source=upload,
            name=form.cleaned_data["name"].strip() or file_name.rsplit(".", 1)[0],
            owner=signed_in(request.user),
            task_type=form.cleaned_data["task_type"] or guess_task_type(file_name),
            description=form.cleaned_data["description"],
            tags=form.cleaned_data["tags"],
        )
        message = (
            f"Imported “{task.name}”: {task.instance_count:,} instances, "
            f"{len(task.labels)} labels ({task.task_type})."
        )
        return message, reverse("suites:probing_detail", kwargs={"name": task.name})

    return upload_page(
        request,
        form,
        template="suites/probing/probing_upload.html",
        max_bytes=settings.GYM_MAX_UPLOAD_BYTES,
        save=save,
    )
