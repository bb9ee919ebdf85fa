"""The base of the commands that work on files without the database (score, probe,
train, minimal_pairs, nlpscholar): they run where no database is set up."""

from __future__ import annotations

from django.core.management.base import BaseCommand


class StandaloneCommand(BaseCommand):
    """A command that needs no database: Django's system checks and the check for
    unapplied migrations are skipped."""

    requires_system_checks: list[str] = []
    requires_migrations_checks = False
