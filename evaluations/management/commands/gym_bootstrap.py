from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand
from django.db.models import QuerySet

from evaluations import baseline
from evaluations.language_models import registry as model_registry
from evaluations.minimal_pairs import services as pair_services
from evaluations.models import LanguageModel
from evaluations.probing import services as probing_services
from evaluations.runs.lifecycle import RequestOutcome
from evaluations.scoring import sources
from evaluations.syntaxgym import services
from suites.models import MinimalPairSet, ProbingTask, Suite


def _baselines() -> QuerySet[LanguageModel]:
    """The two built-in baselines, those of them that are registered."""
    return LanguageModel.objects.filter(
        is_baseline=True, name__in=[baseline.BASELINE_NAME, baseline.NGRAM_BASELINE_NAME]
    )


class Command(BaseCommand):
    help = (
        "Register the built-in baselines so that a fresh offline machine can evaluate: the "
        "random-init GPT-2 (built once) and the CMU US English trigram from pocketsphinx. "
        "With --evaluate-examples, also queue both on the site's example suites (those "
        "without an owner), so that a new site's leaderboard starts with two reference rows, "
        "and on the example minimal-pair sets, and the random baseline on the example "
        "probing tasks."
    )

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument(
            "--evaluate-examples",
            action="store_true",
            help="queue the baselines on every example suite (asking again changes nothing)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        self._register_baselines()
        if options["evaluate_examples"]:
            self._evaluate_examples()
            self._pair_examples()
            self._probe_examples()

    def _evaluate_examples(self) -> None:
        suites = list(
            Suite.objects.filter(owner__isnull=True, archived_at__isnull=True).order_by("pk")
        )
        for model in _baselines().order_by("name"):
            try:
                outcome = services.evaluation_request(model=model, suites=suites)
            except services.BrokerUnavailable as exc:
                self._queued_later(model.display_name, exc)
                continue
            self._queued(model.display_name, outcome, "suites")

    def _pair_examples(self) -> None:
        """Both baselines on every example minimal-pair set."""
        sets = list(MinimalPairSet.objects.filter(owner__isnull=True).order_by("pk"))
        models = list(_baselines())
        if not sets or not models:
            return
        try:
            outcome = pair_services.pair_evaluation_request(
                user=None, models=models, pair_sets=sets
            )
        except services.BrokerUnavailable as exc:
            self._queued_later("example minimal-pair sets", exc)
            return
        self._queued("baselines", outcome, "minimal-pair runs")

    def _probe_examples(self) -> None:
        """The random baseline on every example probing task: a control curve that any
        model's result page can overlay (the n-gram baseline has no layers to probe)."""
        model = LanguageModel.objects.filter(name=baseline.BASELINE_NAME).first()
        if model is None:
            return
        outcome = probing_services.ProbingRequestOutcome(runs=[])
        for task in ProbingTask.objects.filter(owner__isnull=True).order_by("pk"):
            try:
                asked = probing_services.probing_run_request(models=[model], task=task)
            except services.BrokerUnavailable as exc:
                self._queued_later(f"{model.display_name} on {task.name}", exc)
                continue
            outcome.created += asked.created
            outcome.existing += asked.existing
        self._queued(model.display_name, outcome, "probing tasks")

    def _queued(
        self,
        who: str,
        outcome: RequestOutcome[Any] | probing_services.ProbingRequestOutcome,
        what: str,
    ) -> None:
        """Says what a request on the examples queued."""
        self.stdout.write(
            f"{who}: {len(outcome.created)} example {what} queued, "
            f"{len(outcome.existing)} already asked for"
        )

    def _queued_later(self, who: str, exc: Exception) -> None:
        # The rows are recorded; the sweep sends them once the broker is back.
        self.stdout.write(f"{who}: queued later ({exc})")

    def _register_baselines(self) -> None:
        target = settings.VAR_DIR / "models" / baseline.BASELINE_NAME
        if not (target / "config.json").exists():
            sentences = baseline.example_sentences(settings.BASE_DIR / "examples")
            baseline.build_random_gpt2(target, sentences)
            self.stdout.write(f"built the random baseline in {target}")
        self._register(
            source=str(target),
            name=baseline.BASELINE_NAME,
            display_name=baseline.BASELINE_DISPLAY,
            description=baseline.BASELINE_DESCRIPTION,
        )

        trigram = baseline.cmu_trigram_path()
        if trigram is None:
            self.stdout.write(
                "the pocketsphinx package (and its trigram) is not installed: the n-gram "
                "baseline is not registered (pip install -r requirements.txt)"
            )
            return
        self._register(
            source=str(trigram),
            name=baseline.NGRAM_BASELINE_NAME,
            display_name=baseline.NGRAM_BASELINE_DISPLAY,
            description=baseline.NGRAM_BASELINE_DESCRIPTION,
            reference_url=baseline.NGRAM_BASELINE_URL,
            # The package's own file, outside the model folders: this command is run by
            # the site's administrators, so it may allow that one folder.
            extra_model_dirs=[trigram.parent],
        )

    def _register(self, *, extra_model_dirs: Sequence[Path] = (), **fields: Any) -> None:
        # Stored resolved, as model_register stores it.
        fields["source"] = str(Path(fields["source"]).resolve())
        name = fields["name"]
        existing = LanguageModel.objects.filter(name=name).first()
        if existing is not None:
            if sources.artifact_key(existing.source) is not None:
                # Moved into the artifact store (artifacts_migrate): every machine reads
                # it there; this machine's path is not pointed at again.
                self.stdout.write(f"{existing.display_name} already registered (in the store)")
            elif existing.source != fields["source"]:
                # A reinstalled package or a moved checkout: point the baseline at the
                # file that exists now (its results stay).
                LanguageModel.objects.filter(pk=existing.pk).update(source=fields["source"])
                self.stdout.write(f"{existing.display_name}: source moved to {fields['source']}")
            else:
                self.stdout.write(f"{existing.display_name} already registered")
            return
        model = model_registry.model_register(
            is_baseline=True, extra_model_dirs=extra_model_dirs, **fields
        )
        self.stdout.write(f"registered {model.display_name} ({model.kind})")
