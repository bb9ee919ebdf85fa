from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from gym.backup import BackupError, backup_to_store, counts_text, site_backup


class Command(BaseCommand):
    help = (
        "Back up the whole site into DIR: the database (SQLite through its online backup "
        "API, safe while the site runs; PostgreSQL with pg_dump), every folder of files it "
        "keeps (corpora, models, trained models, the var folder), and a manifest with "
        "counts and a sha256 per file. See docs/backup.md."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dir", nargs="?", default="", help="an empty or new folder")
        parser.add_argument(
            "--to-store",
            nargs="?",
            const="now",
            default=None,
            metavar="NAME",
            help="put the backup into the artifact store under backups/NAME/ (by default "
            "the time) instead of a folder: for machines that share no folder",
        )
        parser.add_argument(
            "--force",
            action="store_true",
            help="DIR may hold files: a backup already in it is replaced",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        to_store = options["to_store"]
        if (to_store is None) == (not options["dir"]):
            raise CommandError("give a folder (DIR) or --to-store, one of the two")
        where = options["dir"]
        try:
            if to_store is not None:
                where, manifest = backup_to_store(name="" if to_store == "now" else to_store)
            else:
                manifest = site_backup(folder=Path(options["dir"]), force=options["force"])
        except BackupError as exc:
            raise CommandError(str(exc)) from None
        size = sum(entry["bytes"] for entry in manifest["files"])
        self.stdout.write(
            f"{where}: {manifest['database']['engine']} database "
            f"({counts_text(manifest['counts'])}) and {len(manifest['files'])} files "
            f"({size:,} bytes)"
        )
