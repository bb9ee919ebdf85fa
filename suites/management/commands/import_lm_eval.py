"""Import an lm-evaluation-harness task folder as a minimal-pair set
(suites.minimal_pairs.lm_eval: BLiMP's template shape with local JSONL data)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from suites.formats import minimal_pairs as mp
from suites.management.importing import ImportCommand
from suites.minimal_pairs import lm_eval
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet


class Command(ImportCommand):
    help = (
        "Import an lm-eval multiple-choice log-likelihood task folder (one YAML in BLiMP's "
        "template shape, its local JSONL data) as a minimal-pair set; a task that a pair "
        "set cannot represent is refused with the reason."
    )
    noun = "set"
    model = MinimalPairSet

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("folder", help="the task folder")
        parser.add_argument("--name", help="the set's name (default: the task's)")
        self.add_owner_argument(parser)
        parser.add_argument("--description", default="")

    def handle(self, *args: Any, **options: Any) -> None:
        folder = Path(options["folder"])
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        try:
            task = lm_eval.import_task(folder)
        except lm_eval.LmEvalTaskInvalid as bad:
            raise CommandError(f"{folder}: {bad}") from None
        except mp.MinimalPairFormatError as bad:
            raise CommandError(f"{folder}: {pair_sets.PairSetInvalid(bad.errors)}") from None
        try:
            report = pair_sets.minimal_pair_set_import(
                data="",
                parsed=task.pair_set,
                metric=task.metric,
                name=options["name"] or task.name,
                owner=self.owner(options),
                description=options["description"],
            )
        except pair_sets.PairSetInvalid as bad:
            raise CommandError(f"{folder}: {bad}") from None
        s = report.pair_set
        self.stdout.write(
            f"{folder}: imported {s.name!r} ({s.pair_count} pairs, metric {s.metric})"
        )
