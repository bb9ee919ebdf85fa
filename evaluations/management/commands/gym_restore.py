from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gym.backup import BackupError, counts_text, site_restore


class Command(BaseCommand):
    help = (
        "Restore a backup made by gym_backup into this site, which must be empty: every "
        "checksum is verified before anything changes, then the database and files are "
        "restored and the database is migrated forward. Stop the site's processes first. "
        "See docs/backup.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", help="the backup's folder (it holds manifest.json)")
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace the data this site already holds (its database, and its files "
            "that the backup also has)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            restored = site_restore(
                folder=Path(options["dir"]), force=options["force"], log=self.stdout.write
            )
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{options['dir']}: restored {counts_text(restored['counts'])} and "
            f"{restored['copied']} files"
            + (
                f"; {restored['moved']} model paths moved to this site's folders"
                if restored["moved"]
                else ""
            )
        )
        for difference in restored["differences"]:
            self.stderr.write(f"differs from the backup's manifest: {difference}")
