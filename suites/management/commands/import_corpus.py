from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from suites.corpora.models import Corpus
from suites.corpora.services import CorpusInvalid, corpus_import
from suites.corpora.views import corpus_name_from_file
from suites.management.importing import ImportCommand


class Command(ImportCommand):
    help = (
        "Import a corpus (training text): NLPScholar's TSV with a 'text' column, or plain "
        "text with one sequence per line, either gzipped. The file is streamed into "
        "GYM_CORPUS_DIR; nothing is kept if any line is invalid (the error names it)."
    )
    noun = "corpus"
    model = Corpus
    failure_stream = "stderr"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("path", help="the corpus file (.tsv, .txt, either .gz)")
        self.add_owner_argument(parser)
        parser.add_argument("--name", help="corpus name (default: the file name)")
        parser.add_argument("--description", default="")
        parser.add_argument("--tag", action="append", default=[], help="a tag (repeatable)")
        parser.add_argument(
            "--validation-fraction",
            type=float,
            default=0.01,
            help="share of lines held out for validation (default 0.01)",
        )
        parser.add_argument(
            "--validation-max", type=int, default=10_000, help="at most this many (10,000)"
        )
        parser.add_argument("--validation-seed", type=int, default=0)
        parser.add_argument(
            "--skip-existing",
            action="store_true",
            help="skip the file when a corpus of its name exists (the run command's example)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["path"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        name = options["name"] or corpus_name_from_file(path.name)
        if options["skip_existing"] and self.skipped(path, name):
            return
        started = time.perf_counter()
        try:
            corpus = corpus_import(
                source=path,
                name=name,
                owner=self.owner(options),
                description=options["description"],
                tags=options["tag"],
                validation_fraction=options["validation_fraction"],
                validation_max=options["validation_max"],
                validation_seed=options["validation_seed"],
            )
        except CorpusInvalid as exc:
            self.failed(path, exc.errors)
            raise CommandError(f"{path}: not imported") from None
        self.stdout.write(
            f"{path}: imported '{corpus.name}' ({corpus.line_count} lines, "
            f"{corpus.word_count} words, {corpus.validation_lines} held out for validation) "
            f"in {time.perf_counter() - started:.1f} s"
        )
