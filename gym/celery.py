from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")

app = Celery("gym")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
# Kinds whose tasks live in a package of their own (evaluations/training/tasks.py).
app.autodiscover_tasks(["evaluations.training"])
