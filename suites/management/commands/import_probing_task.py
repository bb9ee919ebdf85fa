from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from suites.formats.probing import TASK_TYPES, guess_task_type
from suites.models import ProbingTask
from suites.probing import ProbingTaskInvalid, probing_task_import


class Command(BaseCommand):
    help = (
        "Import SentEval-style probing files (partition<TAB>label<TAB>sentence per line). "
        "Each file is one task named after the file (past_present.txt -> past_present) "
        "whose type, unless --type is given, is the SentEval task of that name or custom. "
        "Prints one line per file; exits non-zero if any file failed."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="probing files")
        parser.add_argument("--owner", help="username owning the tasks (default: the site itself)")
        parser.add_argument("--type", choices=TASK_TYPES, help="task type of every file")
        parser.add_argument("--name", help="task name (one file only; default: the file name)")
        parser.add_argument("--description", default="")
        parser.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
        parser.add_argument(
            "--skip-existing",
            action="store_true",
            help="skip a file whose task name exists (the run command's examples)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        owner = None
        if options["owner"]:
            try:
                owner = get_user_model().objects.get(username=options["owner"])
            except get_user_model().DoesNotExist:
                raise CommandError(f"no user named {options['owner']!r}") from None
        paths = [Path(raw) for raw in options["paths"]]
        if options["name"] and len(paths) > 1:
            raise CommandError("--name names one task; give one file")
        missing = [str(path) for path in paths if not path.is_file()]
        if missing:
            raise CommandError(f"no such file: {', '.join(missing)}")
        failed = 0
        for path in paths:
            name = options["name"] or path.stem
            if options["skip_existing"] and ProbingTask.objects.filter(name=name).exists():
                self.stdout.write(f"{path}: skipped, task '{name}' exists")
                continue
            started = time.perf_counter()
            try:
                task = probing_task_import(
                    source=path,
                    name=name,
                    owner=owner,
                    task_type=options["type"] or guess_task_type(path.name),
                    description=options["description"],
                    tags=options["tag"],
                )
            except ProbingTaskInvalid as exc:
                failed += 1
                self.stderr.write(f"{path}: not imported:")
                for error in exc.errors:
                    self.stderr.write(f"  {error}")
                continue
            self.stdout.write(
                f"{path}: imported '{task.name}' ({task.task_type}, "
                f"{task.instance_count} instances, {len(task.labels)} labels) "
                f"in {time.perf_counter() - started:.1f} s"
            )
        if failed:
            raise CommandError(f"{failed} of {len(paths)} file(s) failed")
