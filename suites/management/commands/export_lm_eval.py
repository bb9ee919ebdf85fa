"""Write a minimal-pair set as an lm-evaluation-harness task folder (suites.minimal_pairs.lm_eval)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from suites.minimal_pairs import lm_eval
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet


class Command(BaseCommand):
    help = (
        "Write a minimal-pair set as an lm-eval task folder (YAML plus JSONL, local "
        "data_files) that `lm_eval --include_path DIR` runs as it is."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--set", required=True, help="the minimal-pair set's name")
        parser.add_argument("--out", required=True, help="the folder to write (made if absent)")
        parser.add_argument(
            "--metric",
            choices=sorted(lm_eval.DELIMITERS),
            default="lm_eval",
            help="the convention the task reproduces: lm_eval (the harness's BLiMP tasks, a "
            'leading space: target delimiter " ") or sentence (no leading space: Gym\'s '
            "metric sentence)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            pair_set = MinimalPairSet.objects.get(name=options["set"])
        except MinimalPairSet.DoesNotExist:
            raise CommandError(f"no minimal-pair set named {options['set']!r}") from None
        out = Path(options["out"]).resolve()
        try:
            folder = lm_eval.export_task(
                pair_sets.pair_set_data(pair_set),
                set_name=pair_set.name,
                content_hash=pair_set.content_hash,
                metric=options["metric"],
                data_dir=str(out),
            )
        except lm_eval.LmEvalTaskInvalid as bad:
            raise CommandError(str(bad)) from None
        for path in lm_eval.write_task(folder, out):
            self.stderr.write(f"wrote {path}")
        self.stdout.write(
            f"task {folder.name}: lm_eval --include_path {out} --tasks {folder.name} "
            f"({lm_eval.CONVENTIONS[options['metric']]})"
        )
