from __future__ import annotations

from importlib import import_module

from django.apps import AppConfig

from gym import LEAN_STARTUP

# Every kind of run: importing its services module registers it with the run core
# (`evaluations.runs.lifecycle.register`). Adding a kind adds one line here. The order is
# the order of the Runs page's kind filter and of each process's registry.
KIND_MODULES = (
    "evaluations.syntaxgym.services",
    "evaluations.minimal_pairs.services",
    "evaluations.probing.services",
    "evaluations.training.services",
)

# The modules of the tasks that the services send by name (`evaluations.runs.publish`):
# imported here, a task so sent is this process's own task object, which an eager test
# run runs in place.
TASK_MODULES = ("evaluations.runs.tasks", "evaluations.language_models.tasks")


class EvaluationsConfig(AppConfig):
    name = "evaluations"
    verbose_name = "Evaluations"

    def ready(self) -> None:
        # Models in the artifact store ("artifact:<key>") load through this process's
        # cache of it.
        from evaluations.scoring import sources
        from gym import artifact_cache

        sources.register(sources.ARTIFACT, artifact_cache.model_path)
        # Registers the run kinds, so that every process (web, storing worker, GPU
        # worker) knows them before the first message arrives.
        if LEAN_STARTUP:
            return
        for module in (*KIND_MODULES, *TASK_MODULES):
            import_module(module)
