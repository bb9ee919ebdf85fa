from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from suites import formats
from suites.management.importing import ImportCommand
from suites.models import Suite
from suites.syntaxgym import services


class Command(ImportCommand):
    help = (
        "Import SyntaxGym suites from JSON files or folders of them (any known format). "
        "Prints one line per file; exits non-zero if any file failed."
    )
    noun = "suite"
    model = Suite

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="JSON files, or folders searched for *.json")
        self.add_owner_argument(parser)
        parser.add_argument(
            "--on-conflict",
            choices=["error", "skip", "rename"],
            default="error",
            help="when a suite of the same name exists: fail that file (default), skip it, "
            "or import it under the name with a ' (2)', ' (3)'... suffix",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = self.owner(options)
        files = self.files(options["paths"], suffixes=(".json",))
        failed = 0
        for path in files:
            ok = self._import_one(path, owner=owner, on_conflict=options["on_conflict"])
            failed += 0 if ok else 1
        self.finish(failed=failed, total=len(files))
        self.stdout.write(f"{len(files)} of {len(files)} file(s) imported or skipped")

    def summary(self, *, failed: int, total: int) -> str:
        return f"{total - failed} of {total} file(s) imported or skipped; {failed} failed"

    def _import_one(self, path: Path, *, owner: Any, on_conflict: str) -> bool:
        result = formats.load_suite_file(path)
        if result.ok and result.suite is not None:
            wanted = result.suite["meta"]["name"]
            if on_conflict == "skip" and self.skipped(path, wanted):
                return True
        try:
            report = services.suite_import(
                source=result, owner=owner, rename_if_taken=on_conflict == "rename"
            )
        except services.SuiteInvalid as invalid:
            self.failed(path, (f"{error.path}: {error.message}" for error in invalid.errors))
            return False
        suite = report.suite
        notes = f"; {len(report.warnings)} note(s)" if report.warnings else ""
        self.stdout.write(
            f"{path}: imported {suite.name!r} ({suite.item_count} items, "
            f"{suite.condition_count} conditions, {suite.region_count} regions, "
            f"{report.source_format} format{notes})"
        )
        for warning in report.warnings:
            self.stdout.write(f"    note: {warning}")
        return True
