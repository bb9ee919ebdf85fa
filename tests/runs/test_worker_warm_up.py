"""A worker of the gpu queue imports what its runs need before it starts its pool, so
that no run (the first, or one in a pool process that replaced a killed one) pays for
torch and the transformers machinery; a worker of the storing queue imports none of it.
Each case runs in a fresh interpreter, so that what it imported is its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PROBE = """
import json, os, sys
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")
import django
django.setup()
from celery import current_app
from evaluations.runs import tasks
current_app.amqp.queues.select(sys.argv[1].split(","))
before = "torch" in sys.modules
tasks.import_work_functions()
names = ("torch", "transformers.modeling_utils", "transformers.models.gpt2.modeling_gpt2",
         "evaluations.scoring.worker")
print(json.dumps({"before": before, **{n: n in sys.modules for n in names}}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("queues", "imported"), [("gpu", True), ("celery,gpu", True), ("celery", False)]
)
def test_the_gpu_worker_imports_its_work_before_any_run(queues: str, imported: bool) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, queues],
        cwd=REPO,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found.pop("before") is False  # Django and the run kinds alone import no torch
    assert found == dict.fromkeys(found, imported)
