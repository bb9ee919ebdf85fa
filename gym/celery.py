from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")

app = Celery("gym")
app.config_from_object("django.conf:settings", namespace="CELERY")
# The run core's tasks (evaluations/runs/tasks.py), those of kinds that have their own
# (evaluations/training/tasks.py) and uploaded models' checks
# (evaluations/language_models/tasks.py); the apps themselves hold no tasks module.
app.autodiscover_tasks(["evaluations.runs", "evaluations.training", "evaluations.language_models"])
