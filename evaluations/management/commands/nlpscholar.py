from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from django.core.management.base import CommandError, CommandParser

from evaluations.management.standalone import StandaloneCommand
from evaluations.minimal_pairs import files
from evaluations.minimal_pairs.analysis import AnalysisError
from suites.formats.minimal_pairs import MinimalPairFormatError


class Command(StandaloneCommand):
    help = (
        "Run an NLPScholar MinimalPair config (exp, mode [evaluate, analyze], models, "
        "datafpath, predfpath, resultsfpath, save, conditions, pred_measure, word_summary, "
        "punctuation) and write the files NLPScholar would. Paths are relative to the "
        "current folder, as in NLPScholar. Needs no database."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("config", help="the YAML config file")

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["config"])
        if not path.is_file():
            raise CommandError(f"{path}: no such file")
        try:
            # safe_load builds plain data only: no Python objects from the user's file.
            config = yaml.safe_load(path.read_text(encoding="utf-8"))
        except (yaml.YAMLError, UnicodeDecodeError) as exc:
            raise CommandError(f"{path}: not a readable YAML file: {exc}") from exc
        try:
            written = files.run_nlpscholar_config(config, log=self.stderr.write)
        except (files.ConfigError, MinimalPairFormatError, AnalysisError, OSError) as exc:
            raise CommandError(f"{path}: {exc}") from exc
        for target in written:
            self.stderr.write(f"wrote {target}")
