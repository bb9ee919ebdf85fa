from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gym.backup import BackupError, backup_from_store, counts_text, site_restore


class Command(BaseCommand):
    help = (
        "Restore a backup made by gym_backup into this site, which must be empty: every "
        "checksum is verified before anything changes, then the database and files are "
        "restored and the database is migrated forward. Stop the site's processes first. "
        "See docs/backup.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "dir", nargs="?", default="", help="the backup's folder (it holds manifest.json)"
        )
        parser.add_argument(
            "--from-store",
            metavar="KEY",
            default="",
            help="the backup in the artifact store (backups/NAME, as gym_backup --to-store "
            "printed it): fetched, checked, then restored",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="replace the data this site already holds (its database, and its files "
            "that the backup also has)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        key = options["from_store"]
        if bool(key) == bool(options["dir"]):
            raise CommandError("give a backup's folder (DIR) or --from-store KEY, one of the two")
        try:
            if key:
                with tempfile.TemporaryDirectory(prefix="gym-restore-") as scratch:
                    folder = backup_from_store(key, Path(scratch) / "backup")
                    restored = site_restore(
                        folder=folder, force=options["force"], log=self.stdout.write
                    )
            else:
                restored = site_restore(
                    folder=Path(options["dir"]), force=options["force"], log=self.stdout.write
                )
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{key or options['dir']}: restored {counts_text(restored['counts'])} and "
            f"{restored['copied']} files"
            + (
                f"; {restored['moved']} model paths moved to this site's folders"
                if restored["moved"]
                else ""
            )
        )
        for difference in restored["differences"]:
            self.stderr.write(f"differs from the backup's manifest: {difference}")
