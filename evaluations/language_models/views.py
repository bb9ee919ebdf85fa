"""Pages of the language models: the list, registering or uploading one, hiding one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evaluations.language_models import registry as model_registry
from evaluations.language_models import uploads as model_uploads
from evaluations.language_models.forms import ModelRegisterForm
from evaluations.models import LanguageModel
from gym.accounts import signed_in
from gym.errors import UploadTooLarge


def model_list(request: HttpRequest) -> HttpResponse:
    models = model_registry.visible_models(request.user)
    return render(request, "evaluations/language_models/model_list.html", {"models": models})


def _saved(request: HttpRequest, form: ModelRegisterForm) -> tuple[LanguageModel, str]:
    """The model the valid form registers or uploads, and what to say of it. Raises the
    services' errors."""
    fields = dict(form.cleaned_data)
    upload, hidden = fields.pop("file"), fields.pop("hidden")
    user = signed_in(request.user)
    if upload is None:
        model = model_registry.model_register(user=user, **fields)
        return model, f"Registered {model.display_name} ({model.get_kind_display()})."
    del fields["source"], fields["revision"]
    model = model_uploads.model_upload(
        stream=upload, filename=upload.name or "", user=user, hidden=hidden, **fields
    )
    return model, (
        f"Uploaded {model.display_name} ({model.get_kind_display()}): a worker is checking "
        "it (loading it and scoring one sentence) before it can run."
    )


@login_required
def model_register(request: HttpRequest) -> HttpResponse:
    form = ModelRegisterForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        try:
            model, message = _saved(request, form)
        except model_registry.ModelRegistrationError as invalid:
            for field, problem in invalid.errors.items():
                form.add_error(field if field in form.fields else None, problem)
        except (model_uploads.ModelUploadRefused, UploadTooLarge) as refused:
            form.add_error("file", str(refused))
        else:
            messages.success(request, message)
            return redirect(model)
    status = 400 if request.method == "POST" else 200
    return render(
        request, "evaluations/language_models/model_register.html", {"form": form}, status=status
    )


@login_required
@require_POST
def model_visibility(request: HttpRequest, name: str) -> HttpResponse:
    """Staff hide a model from leaderboards and lists (or show it again)."""
    if not request.user.is_staff:
        return HttpResponseForbidden("Only staff may hide or show models.")
    model = get_object_or_404(LanguageModel, name=name)
    model_registry.model_set_hidden(model=model, hidden=request.POST.get("hidden") == "1")
    messages.success(
        request, f"{model.display_name} is now {'hidden' if model.is_hidden else 'shown'}."
    )
    return redirect(model)
