"""A training run's row names its folder in the artifact store, not the web host's path
(issue 44). The path an existing row holds moves to `legacy_out_dir`, which only
`manage.py artifacts_migrate` reads (and empties once the run's files are in the store):
nothing is lost, and the migration reverses."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from django.db import migrations, models


def _folder_name(name: str, run_id: int, asked_at: Any) -> str:
    # evaluations.training.stored.folder_name as of this migration (frozen here).
    return f"{name}-{run_id}-{asked_at:%Y%m%d%H%M%S%f}"


def store_folders(apps: Any, schema_editor: Any) -> None:
    TrainingRun = apps.get_model("evaluations", "TrainingRun")
    for run in TrainingRun.objects.all().iterator():
        name = PurePath(run.legacy_out_dir).name if run.legacy_out_dir else ""
        if not run.store_folder and name:
            run.store_folder = _folder_name(name, run.pk, run.created_at)
            run.save(update_fields=["store_folder"])


class Migration(migrations.Migration):
    dependencies = [
        ("evaluations", "0019_model_series"),
    ]

    operations = [
        migrations.RenameField(
            model_name="trainingrun", old_name="out_dir", new_name="legacy_out_dir"
        ),
        migrations.AlterField(
            model_name="trainingrun",
            name="legacy_out_dir",
            field=models.CharField(blank=True, max_length=500),
        ),
        migrations.AddField(
            model_name="trainingrun",
            name="store_folder",
            field=models.CharField(blank=True, max_length=300),
        ),
        migrations.RunPython(store_folders, migrations.RunPython.noop),
    ]
