"""Write a minimal-pair set, or a test suite whose predictions compare whole sentences, as
an lm-evaluation-harness task folder (suites.minimal_pairs.lm_eval, suites.syntaxgym.lm_eval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from suites.formats import lm_eval_tasks
from suites.minimal_pairs import lm_eval
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet, Suite
from suites.syntaxgym import lm_eval as suite_lm_eval
from suites.syntaxgym import selectors as suite_selectors


class Command(BaseCommand):
    help = (
        "Write a minimal-pair set (--set) or a test suite whose predictions compare whole "
        "sentences (--suite) as an lm-eval task folder (YAML plus JSONL, local data_files) "
        "that `lm_eval --include_path DIR` runs as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        which = parser.add_mutually_exclusive_group(required=True)
        which.add_argument("--set", help="the minimal-pair set's name")
        which.add_argument("--suite", help="the test suite's name")
        parser.add_argument("--out", required=True, help="the folder to write (made if absent)")
        parser.add_argument(
            "--metric",
            choices=sorted(lm_eval_tasks.DELIMITERS),
            default=None,
            help="the convention the task reproduces: lm_eval (the harness's BLiMP tasks, a "
            'leading space: target delimiter " ") or sentence (no leading space: Gym\'s '
            "metric sentence, and what a suite evaluation scores). Default: lm_eval for a "
            "set, sentence for a suite",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        out = Path(options["out"]).resolve()
        try:
            if options["suite"]:
                folder, convention = self._suite(options["suite"], options["metric"], out)
            else:
                folder, convention = self._set(options["set"], options["metric"], out)
        except lm_eval_tasks.LmEvalTaskInvalid as bad:
            raise CommandError(str(bad)) from None
        for path in lm_eval_tasks.write_task(folder, out):
            self.stderr.write(f"wrote {path}")
        self.stdout.write(
            f"{'tasks' if len(folder.tasks) > 1 else 'task'} {folder.task_list}: "
            f"lm_eval --include_path {out} --tasks {folder.task_list} ({convention})"
        )

    def _set(self, name: str, metric: str | None, out: Path) -> tuple[lm_eval.TaskFolder, str]:
        try:
            pair_set = MinimalPairSet.objects.get(name=name)
        except MinimalPairSet.DoesNotExist:
            raise CommandError(f"no minimal-pair set named {name!r}") from None
        metric = metric or "lm_eval"
        folder = lm_eval.export_task(
            pair_sets.pair_set_data(pair_set),
            set_name=pair_set.name,
            content_hash=pair_set.content_hash,
            metric=metric,
            data_dir=str(out),
        )
        return folder, lm_eval.CONVENTIONS[metric]

    def _suite(self, name: str, metric: str | None, out: Path) -> tuple[lm_eval.TaskFolder, str]:
        try:
            suite = Suite.objects.get(name=name)
        except Suite.DoesNotExist:
            raise CommandError(f"no test suite named {name!r}") from None
        metric = metric or suite_lm_eval.DEFAULT_METRIC
        folder = suite_lm_eval.export_suite(
            suite_selectors.suite_canonical(suite),
            suite_name=suite.name,
            content_hash=suite.content_hash,
            metric=metric,
            data_dir=str(out),
        )
        return folder, suite_lm_eval.CONVENTIONS[metric]
