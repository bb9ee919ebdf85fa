"""What the import commands of the three kinds of test data (import_suites,
import_minimal_pairs, import_probing_task) share: the owner option, finding the files,
importing each under its name, skipping names that exist, reporting a failed file and
the exit status. Each command keeps only what its kind reads and says."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db.models import Model

from suites.catalog_services import DataInvalid


class ImportCommand(BaseCommand):
    # What one imported thing is called in messages ("suite", "set", "task").
    noun = "item"
    model: type[Model]
    # Where a failed file's reasons go: "stdout" or "stderr".
    failure_stream = "stdout"

    def add_owner_argument(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--owner", help=f"username owning the {self.noun}s (default: the site itself)"
        )

    def owner(self, options: dict[str, Any]) -> Any:
        """The --owner user, or None (the site's own)."""
        if not options["owner"]:
            return None
        users = get_user_model()
        try:
            return users.objects.get(username=options["owner"])
        except users.DoesNotExist:
            raise CommandError(f"no user named {options['owner']!r}") from None

    def files(self, raw_paths: Sequence[str], *, suffixes: Sequence[str]) -> list[Path]:
        """The files named, and those with one of `suffixes` below the folders named (in
        name order). An error names a path that is neither, or says that none was found."""
        files: list[Path] = []
        for raw in raw_paths:
            path = Path(raw)
            if path.is_dir():
                files += sorted(p for p in path.rglob("*") if p.suffix in suffixes and p.is_file())
            elif path.is_file():
                files.append(path)
            else:
                raise CommandError(f"{raw}: no such file or folder")
        if not files:
            raise CommandError(f"no {' or '.join(suffixes)} files found in {', '.join(raw_paths)}")
        return files

    def one_name_only(self, options: dict[str, Any], files: Sequence[Path]) -> None:
        """--name names one thing: refuse it with several files."""
        if options.get("name") and len(files) > 1:
            raise CommandError(f"--name names one {self.noun}; give one file")

    def skipped(self, path: Path, name: str) -> bool:
        """Whether a {noun} named `name` exists; says so for `path` when it does."""
        if not self.model._default_manager.filter(name=name).exists():
            return False
        self.stdout.write(f"{path}: skipped, a {self.noun} named {name!r} exists")
        return True

    def failed(self, path: Path, messages: Iterable[object]) -> None:
        """Reports a file that was not imported, with every reason."""
        stream = getattr(self, self.failure_stream)
        stream.write(f"{path}: FAILED")
        for message in messages:
            stream.write(f"    {message}")

    def import_files(
        self,
        options: dict[str, Any],
        *,
        suffixes: Sequence[str],
        skip_existing: bool,
        invalid: type[DataInvalid],
        import_one: Callable[[Path, str], None],
    ) -> None:
        """Imports the files that --paths names (see `files`), each under --name or its
        file name's stem, skipping a name that exists when `skip_existing`:
        `import_one(path, name)` imports one file and says so, and a file it refuses with
        `invalid` is reported with every reason. Exits non-zero if any file failed."""
        files = self.files(options["paths"], suffixes=suffixes)
        self.one_name_only(options, files)
        failed = 0
        for path in files:
            name = options["name"] or path.stem
            if skip_existing and self.skipped(path, name):
                continue
            try:
                import_one(path, name)
            except invalid as refused:
                failed += 1
                self.failed(path, refused.errors)
        self.finish(failed=failed, total=len(files))

    def summary(self, *, failed: int, total: int) -> str:
        return f"{failed} of {total} file(s) failed"

    def finish(self, *, failed: int, total: int) -> None:
        """Exits non-zero, with the summary, when any file failed."""
        if failed:
            raise CommandError(self.summary(failed=failed, total=total))
