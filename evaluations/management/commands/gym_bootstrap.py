from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand

from evaluations import baseline, services
from evaluations.models import LanguageModel


class Command(BaseCommand):
    help = "Build (once) and register the random-init baseline model, so a fresh offline machine can evaluate."

    def handle(self, *args: Any, **options: Any) -> None:
        target = settings.VAR_DIR / "models" / baseline.BASELINE_NAME
        if not (target / "config.json").exists():
            sentences = baseline.example_sentences(settings.BASE_DIR / "examples")
            baseline.build_random_gpt2(target, sentences)
            self.stdout.write(f"built the random baseline in {target}")
        if LanguageModel.objects.filter(name=baseline.BASELINE_NAME).exists():
            self.stdout.write("random baseline already registered")
            return
        model = services.model_register(
            source=str(target),
            name=baseline.BASELINE_NAME,
            display_name=baseline.BASELINE_DISPLAY,
            description=baseline.BASELINE_DESCRIPTION,
            is_baseline=True,
        )
        self.stdout.write(f"registered {model.display_name} ({model.kind})")
