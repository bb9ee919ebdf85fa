"""The base of the commands that work on files without the database (score, probe,
train, minimal_pairs, nlpscholar): they run where no database is set up."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand


class StandaloneCommand(BaseCommand):
    """A command that needs no database: Django's system checks and the check for
    unapplied migrations are skipped."""

    requires_system_checks: list[str] = []
    requires_migrations_checks = False

    def progress_line(self, text: str) -> None:
        """Shows `text` over the progress line on standard error, only on a terminal (a
        log or a pipe gets no stream of carriage returns)."""
        if sys.stderr.isatty():
            self.stderr.write(f"\r{text}", ending="")

    def end_progress_line(self) -> None:
        """Ends the progress line, so that what follows starts a line of its own."""
        if sys.stderr.isatty():
            self.stderr.write("")

    def sentence_progress(self, done: int, total: int) -> None:
        """A scoring engine's progress callback: sentences scored of all."""
        self.progress_line(f"{done}/{total} sentences")
