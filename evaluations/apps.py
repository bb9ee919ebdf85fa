from __future__ import annotations

from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "evaluations"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        # Registers the suite run kind, so that every process (web, storing worker, GPU
        # worker) knows it before the first message arrives.
        from evaluations import services  # noqa: F401
