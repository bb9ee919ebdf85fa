from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from suites import formats
from suites.models import Suite
from suites.syntaxgym import selectors


class Command(BaseCommand):
    help = "Write a suite in the canonical (current) SyntaxGym JSON format, or CSV."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="the suite's name")
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")
        parser.add_argument("--csv", action="store_true", help="write CSV instead of JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            suite = Suite.objects.get(name=options["name"])
        except Suite.DoesNotExist:
            raise CommandError(f"no suite named {options['name']!r}") from None
        data = selectors.suite_canonical(suite)
        text = formats.to_csv_text(data) if options["csv"] else formats.to_json_text(data)
        if options["output"]:
            Path(options["output"]).write_text(text, encoding="utf-8")
            self.stderr.write(f"wrote {options['output']}")
        else:
            self.stdout.write(text, ending="")
