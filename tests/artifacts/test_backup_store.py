"""Backups in the artifact store (docs/backup.md): on SeaweedFS's S3, `gym_backup
--to-store` puts the site's backup under backups/<name>/ (its manifest last), a second
backup of that name is refused, `gym_restore --from-store` fetches it, checks every file
and restores it into an empty site on another machine that shares only the store; a
damaged stored file or an unknown key is refused before anything changes."""

from __future__ import annotations

import io
import json
import uuid

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.test import override_settings

from gym import artifacts, backup
from tests.artifacts.conftest import s3_settings
from tests.conftest import manage
from tests.test_backup import empty_database, site, site_env  # noqa: F401

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_backup_into_the_store_restores_elsewhere(
    seaweed,
    site,  # noqa: F811
    tmp_path,
    empty_database,  # noqa: F811
) -> None:
    prefix = f"site-{uuid.uuid4().hex[:12]}"
    with override_settings(**s3_settings(seaweed, prefix)):
        out = io.StringIO()
        call_command("gym_backup", "--to-store", "nightly", stdout=out)
        assert out.getvalue().startswith("backups/nightly: ")
        assert backup.backups_in_store() == ["backups/nightly"]
        stored = {e["path"] for e in artifacts.read_manifest("backups/nightly")}
        assert "manifest.json" in stored
        assert f"files/corpora/{site['corpus'].file_name}" in stored
        # No scratch copy is left on this machine.
        assert not list(site["var"].glob(".backup-*"))
        with pytest.raises(CommandError, match="already holds a backup backups/nightly"):
            call_command("gym_backup", "--to-store", "nightly")
        with pytest.raises(CommandError, match="one of the two"):
            call_command("gym_backup")
        # Named by the time when no name is given.
        call_command("gym_backup", "--to-store", stdout=io.StringIO())
        assert len(backup.backups_in_store()) == 2

        with pytest.raises(CommandError, match=r"no finished backup backups/weekly .*nightly"):
            call_command("gym_restore", "--from-store", "weekly")

    # Another machine: an empty site of its own that shares only the store.
    restored = tmp_path / "restored"
    env = site_env(restored, empty_database) | seaweed.settings(prefix)
    answer = manage(env, "gym_restore", "--from-store", "backups/nightly")
    assert answer.returncode == 0, answer.stderr
    assert "backups/nightly: restored 2 suites, 1 pair sets, 1 probing tasks, 1 corpora" in (
        answer.stdout
    )
    assert (restored / "corpora" / site["corpus"].file_name).read_text() == site[
        "corpus"
    ].path.read_text()


def test_a_damaged_stored_backup_is_refused(seaweed, site, tmp_path) -> None:  # noqa: F811
    with override_settings(**s3_settings(seaweed, f"site-{uuid.uuid4().hex[:12]}")):
        call_command("gym_backup", "--to-store", "b1", stdout=io.StringIO())
        artifacts.put_file("backups/b1/files/manifest.json", io.BytesIO(b"{}"))
        with pytest.raises(backup.BackupError, match="the stored manifest.json is damaged"):
            backup.backup_from_store("b1", tmp_path / "fetched")
        with pytest.raises(CommandError, match="damaged"):
            call_command("gym_restore", "--from-store", "b1")
        assert json.loads(artifacts.open_file("backups/b1/manifest.json").read())["files"]
