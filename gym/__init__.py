from __future__ import annotations

import os

# The Celery app is made when Django starts, so that every task binds to it. A process
# started for a command that sends no task skips it: manage.py sets GYM_LEAN_STARTUP for
# the commands in its LEAN_STARTUP (not a setting: a web process or worker without the
# app would send its tasks to Celery's default broker).
LEAN_STARTUP = os.environ.get("GYM_LEAN_STARTUP", "") == "1"

if not LEAN_STARTUP:
    from gym.celery import app as celery_app

    __all__ = ["celery_app"]
