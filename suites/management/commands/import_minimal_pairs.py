from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from suites.formats import pair_datasets
from suites.management.importing import ImportCommand
from suites.minimal_pairs import sets as pair_sets
from suites.models import MinimalPairSet

SUFFIXES = (".tsv", ".jsonl", ".txt", ".parquet")


class Command(ImportCommand):
    help = (
        "Import minimal-pair sets (NLPScholar TSV, BLiMP-style JSON Lines or Parquet, CLAMS, "
        "Zorro, ...; see --file-format) from files or folders (searched for *.tsv, *.jsonl, "
        "*.txt and *.parquet). Each file is one set, named after the file unless "
        "--name is given; each is saved whole or not at all. Exits non-zero if any failed."
    )
    noun = "set"
    model = MinimalPairSet

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="files, or folders of minimal-pair files")
        self.add_owner_argument(parser)
        parser.add_argument("--name", help="the set's name (one file only)")
        parser.add_argument("--description", default="")
        parser.add_argument("--tags", default="", help="comma-separated tags for every set")
        parser.add_argument(
            "--on-conflict",
            choices=["error", "skip"],
            default="error",
            help="when a set of the same name exists: fail that file (default) or skip it",
        )
        parser.add_argument(
            "--drop-incomplete-pairs",
            action="store_true",
            help="leave out pairs without both an expected and an unexpected sentence, with "
            "a warning (as NLPScholar does), instead of refusing the file",
        )
        parser.add_argument(
            "--file-format",
            "--format",
            choices=list(pair_datasets.FORMATS),
            default="",
            help="the files' format (default: detected from each file's content)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = self.owner(options)

        def import_one(path: Path, name: str) -> None:
            report = pair_sets.minimal_pair_set_import(
                data=path.read_bytes(),
                filename=path.name,
                name=name,
                owner=owner,
                description=options["description"],
                tags=options["tags"].split(","),
                drop_incomplete_pairs=options["drop_incomplete_pairs"],
                file_format=options["file_format"],
            )
            s = report.pair_set
            self.stdout.write(
                f"{path}: imported {s.name!r} ({s.pair_count} pairs, {s.sentence_count} "
                f"sentences, {report.source_format})"
            )
            for warning in report.warnings:
                self.stdout.write(f"  warning: {warning}")

        self.import_files(
            options,
            suffixes=SUFFIXES,
            skip_existing=options["on_conflict"] == "skip",
            invalid=pair_sets.PairSetInvalid,
            import_one=import_one,
        )
