from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from suites import pair_sets
from suites.models import MinimalPairSet

SUFFIXES = (".tsv", ".jsonl")


class Command(BaseCommand):
    help = (
        "Import minimal-pair sets (NLPScholar data TSV or BLiMP JSONL) from files or folders "
        "(searched for *.tsv and *.jsonl). Each file is one set, named after the file unless "
        "--name is given; each is saved whole or not at all. Exits non-zero if any failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="files, or folders of .tsv / .jsonl files")
        parser.add_argument("--owner", help="username owning the sets (default: the site itself)")
        parser.add_argument("--name", help="the set's name (one file only)")
        parser.add_argument("--description", default="")
        parser.add_argument("--tags", default="", help="comma-separated tags for every set")
        parser.add_argument(
            "--on-conflict",
            choices=["error", "skip"],
            default="error",
            help="when a set of the same name exists: fail that file (default) or skip it",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = None
        if options["owner"]:
            try:
                owner = get_user_model().objects.get(username=options["owner"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['owner']!r}") from None
        files: list[Path] = []
        for raw in options["paths"]:
            path = Path(raw)
            if path.is_dir():
                files += sorted(p for p in path.rglob("*") if p.suffix in SUFFIXES and p.is_file())
            elif path.is_file():
                files.append(path)
            else:
                raise CommandError(f"{raw}: no such file or folder")
        if not files:
            raise CommandError("no .tsv or .jsonl files found")
        if options["name"] and len(files) > 1:
            raise CommandError("--name needs exactly one file")
        failed = 0
        for path in files:
            name = options["name"] or path.stem
            if (
                options["on_conflict"] == "skip"
                and MinimalPairSet.objects.filter(name=name).exists()
            ):
                self.stdout.write(f"{path}: skipped, a set named {name!r} exists")
                continue
            try:
                report = pair_sets.minimal_pair_set_import(
                    data=path.read_bytes(),
                    filename=path.name,
                    name=name,
                    owner=owner,
                    description=options["description"],
                    tags=options["tags"].split(","),
                )
            except pair_sets.PairSetInvalid as invalid:
                failed += 1
                self.stdout.write(f"{path}: FAILED")
                for error in invalid.errors:
                    self.stdout.write(f"    {error}")
                continue
            s = report.pair_set
            self.stdout.write(
                f"{path}: imported {s.name!r} ({s.pair_count} pairs, {s.sentence_count} "
                f"sentences, {report.source_format})"
            )
        if failed:
            raise CommandError(f"{failed} of {len(files)} file(s) failed")
