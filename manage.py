#!/usr/bin/env python
from __future__ import annotations

import atexit
import os
import sys

# Commands that end a process holding torch, transformers and a model: tearing the
# interpreter down after them (every module, every object) takes seconds and does
# nothing a finished command needs, so the process ends once the exit handlers ran.
QUICK_EXIT = {"score"}


def main() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")
    from django.core.management import execute_from_command_line

    execute_from_command_line(sys.argv)
    if len(sys.argv) > 1 and sys.argv[1] in QUICK_EXIT:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
