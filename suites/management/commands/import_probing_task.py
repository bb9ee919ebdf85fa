from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandParser

from suites.formats.probing import TASK_TYPES, guess_task_type
from suites.management.importing import ImportCommand
from suites.models import ProbingTask
from suites.probing.services import ProbingTaskInvalid, probing_task_import

SUFFIXES = (".txt",)


class Command(ImportCommand):
    help = (
        "Import SentEval-style probing files (partition<TAB>label<TAB>sentence per line), "
        "or folders of them (*.txt). Each file is one task named after the file "
        "(past_present.txt -> past_present) whose type, unless --type is given, is the "
        "SentEval task of that name or custom. Prints one line per file; exits non-zero if "
        "any file failed."
    )
    noun = "task"
    model = ProbingTask
    # Problems go to stderr, so that a run's stdout lists only what was imported.
    failure_stream = "stderr"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("paths", nargs="+", help="probing files, or folders of .txt files")
        self.add_owner_argument(parser)
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
        owner = self.owner(options)

        def import_one(path: Path, name: str) -> None:
            started = time.perf_counter()
            task = probing_task_import(
                source=path,
                name=name,
                owner=owner,
                task_type=options["type"] or guess_task_type(path.name),
                description=options["description"],
                tags=options["tag"],
            )
            self.stdout.write(
                f"{path}: imported '{task.name}' ({task.task_type}, "
                f"{task.instance_count} instances, {len(task.labels)} labels) "
                f"in {time.perf_counter() - started:.1f} s"
            )

        self.import_files(
            options,
            suffixes=SUFFIXES,
            skip_existing=options["skip_existing"],
            invalid=ProbingTaskInvalid,
            import_one=import_one,
        )
