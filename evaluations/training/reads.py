"""What the training kind hands other rooms through the run kinds registry (`RunKind` in
`services.py` names it): its section of a model's page, where a trained model comes from."""

from __future__ import annotations

from django import template
from django.utils.safestring import SafeString

from evaluations.models import LanguageModel
from evaluations.runs.reads import included
from evaluations.training.selectors import model_provenance


def model_section(context: template.Context, model: LanguageModel) -> SafeString:
    """Its training run (the finished model) or the run it is a checkpoint of, with the
    corpus and the options."""
    return included(
        context,
        "evaluations/training/_model_provenance.html",
        {"model": model, **model_provenance(model)},
    )
