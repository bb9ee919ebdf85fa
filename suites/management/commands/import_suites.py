from __future__ import annotations

from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from suites import formats, services
from suites.models import Suite


class Command(BaseCommand):
    help = (
        "Import SyntaxGym suites from JSON files or folders of them (any known format). "
        "Prints one line per file; exits non-zero if any file failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="JSON files, or folders searched for *.json")
        parser.add_argument("--owner", help="username owning the suites (default: the site itself)")
        parser.add_argument(
            "--on-conflict",
            choices=["error", "skip", "rename"],
            default="error",
            help="when a suite of the same name exists: fail that file (default), skip it, "
            "or import it under the name with a ' (2)', ' (3)'... suffix",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = None
        if options["owner"]:
            try:
                owner = get_user_model().objects.get(username=options["owner"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['owner']!r}") from None
        files = self._files(options["paths"])
        failed = 0
        for path in files:
            ok = self._import_one(path, owner=owner, on_conflict=options["on_conflict"])
            failed += 0 if ok else 1
        summary = f"{len(files) - failed} of {len(files)} file(s) imported or skipped"
        if failed:
            raise CommandError(f"{summary}; {failed} failed")
        self.stdout.write(summary)

    def _files(self, raw_paths: list[str]) -> list[Path]:
        files: list[Path] = []
        for raw in raw_paths:
            path = Path(raw)
            if path.is_dir():
                files.extend(sorted(p for p in path.rglob("*.json") if p.is_file()))
            elif path.is_file():
                files.append(path)
            else:
                raise CommandError(f"{raw}: no such file or folder")
        if not files:
            raise CommandError("no .json files found in " + ", ".join(raw_paths))
        return files

    def _import_one(self, path: Path, *, owner: Any, on_conflict: str) -> bool:
        result = formats.load_suite_file(path)
        name = None
        if result.ok and result.suite is not None:
            wanted = result.suite["meta"]["name"]
            if Suite.objects.filter(name=wanted).exists():
                if on_conflict == "skip":
                    self.stdout.write(f"{path}: skipped, a suite named {wanted!r} exists")
                    return True
                if on_conflict == "rename":
                    name = self._free_name(wanted)
        try:
            report = services.suite_import(source=result, owner=owner, name=name)
        except services.SuiteInvalid as invalid:
            self.stdout.write(f"{path}: FAILED")
            for error in invalid.errors:
                self.stdout.write(f"    {error.path}: {error.message}")
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

    def _free_name(self, wanted: str) -> str:
        n = 2
        while Suite.objects.filter(name=f"{wanted} ({n})").exists():
            n += 1
        return f"{wanted} ({n})"
