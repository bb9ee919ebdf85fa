from __future__ import annotations

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")

# The embedded broker (CELERY_BROKER_URL=filesystem://) is kombu's filesystem transport
# with atomic writes and claims: see gym.broker.
TRANSPORT_ALIASES["filesystem"] = "gym.broker:Transport"

app = Celery("gym")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
