from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from evaluations.language_models.registry import ModelRegistrationError
from evaluations.minimal_pairs import services as pair_services
from evaluations.runs import lifecycle as runs
from suites.formats.limits import UNLIMITED
from suites.models import MinimalPairSet


class Command(BaseCommand):
    help = (
        "Import a predictions TSV written by NLPScholar's evaluate (token, sentid, word, "
        "wordpos, model, tokenizer, punctuation, prob, surp; its words taken as given) as "
        "the results of a registered model on a minimal-pair set. Every sentence of the set "
        "must be there; nothing is saved on any error."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("file", help="the predictions TSV")
        parser.add_argument("--set", required=True, dest="pair_set", help="the set's name")
        parser.add_argument("--model", required=True, help="the model's short name")
        parser.add_argument(
            "--register",
            action="store_true",
            help="register a model of that name for imported results only (source "
            "imported:<name>, never run on a worker) when there is none",
        )
        parser.add_argument("--display-name", default="", help="with --register")
        parser.add_argument(
            "--file-model", default="", help="the model to import from a file that holds several"
        )
        parser.add_argument(
            "--drop-unknown-rows",
            action="store_true",
            help="leave out rows whose sentid is not in the set (a set uploaded with incomplete "
            "pairs left out), with a warning that counts them, instead of refusing the file",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        pair_set = MinimalPairSet.objects.filter(name=options["pair_set"]).first()
        if pair_set is None:
            raise CommandError(f"no minimal-pair set named {options['pair_set']!r}")
        path = Path(options["file"])
        try:
            data = path.read_bytes()
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc.strerror}") from None
        try:
            evaluation = pair_services.pair_predictions_import(
                pair_set=pair_set,
                model_name=options["model"],
                register=options["register"],
                display_name=options["display_name"],
                file_model=options["file_model"],
                drop_unknown_rows=options["drop_unknown_rows"],
                data=data,
                user=None,
                check_permission=False,
                limits=UNLIMITED,
            )
        except pair_services.PredictionsInvalid as invalid:
            for error in invalid.errors:
                self.stderr.write(f"{path}: {error}")
            raise CommandError(f"{path}: not imported ({len(invalid.errors)} problem(s))") from None
        except (ModelRegistrationError, runs.RunConflict) as refused:
            raise CommandError(str(refused)) from None
        for warning in (evaluation.diagnostics or {}).get("import_warnings") or []:
            self.stdout.write(f"{path}: warning: {warning}")
        accuracy = "none" if evaluation.accuracy is None else f"{evaluation.accuracy:.3f}"
        self.stdout.write(
            f"{path}: imported as evaluation {evaluation.pk} ({evaluation.model.name} on "
            f"{pair_set.name}: accuracy {accuracy}, {evaluation.ties} ties)"
        )
