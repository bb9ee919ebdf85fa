#!/usr/bin/env python
from __future__ import annotations

import atexit
import os
import sys

# Commands that end a process holding torch, transformers and a model: tearing the
# interpreter down after them (every module, every object) takes seconds and does
# nothing a finished command needs, so the process ends once the exit handlers ran.
QUICK_EXIT = {"score"}
# Commands that send no Celery task and need no run kind: their process starts without
# the Celery app and without registering the run kinds (gym.LEAN_STARTUP), whose imports
# (Celery, kombu, DRF serializers, the services of every kind) cost a second of CPU
# before the command begins.
LEAN_STARTUP = {"score"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")
    if len(sys.argv) > 1 and sys.argv[1] in LEAN_STARTUP:
        os.environ["GYM_LEAN_STARTUP"] = "1"
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
    if len(sys.argv) > 1 and sys.argv[1] in QUICK_EXIT:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
