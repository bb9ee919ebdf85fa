"""Pages of the language models: the list, registering one, hiding one."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from evaluations.language_models import registry as model_registry
from evaluations.language_models.forms import ModelRegisterForm
from evaluations.models import LanguageModel
from gym.accounts import signed_in


def model_list(request: HttpRequest) -> HttpResponse:
    models = model_registry.visible_models(request.user)
    return render(request, "evaluations/model_list.html", {"models": models})


@login_required
def model_register(request: HttpRequest) -> HttpResponse:
    form = ModelRegisterForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            model = model_registry.model_register(user=signed_in(request.user), **form.cleaned_data)
        except model_registry.ModelRegistrationError as invalid:
            for field, message in invalid.errors.items():
                form.add_error(field if field in form.fields else None, message)
        else:
            messages.success(
                request, f"Registered {model.display_name} ({model.get_kind_display()})."
            )
            return redirect(model)
    status = 400 if request.method == "POST" else 200
    return render(request, "evaluations/model_register.html", {"form": form}, status=status)


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
