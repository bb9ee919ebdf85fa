from __future__ import annotations

from django.apps import AppConfig


class EvaluationsConfig(AppConfig):
    name = "evaluations"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        # Registers the run kinds, so that every process (web, storing worker, GPU
        # worker) knows them before the first message arrives.
        from evaluations.minimal_pairs import services as pair_services  # noqa: F401
        from evaluations.probing import services as probing_services  # noqa: F401
        from evaluations.syntaxgym import services  # noqa: F401
        from evaluations.training import services as training  # noqa: F401
