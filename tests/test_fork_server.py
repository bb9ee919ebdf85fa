"""The tests' fork server (tests/worker_zygote.py) forks a worker only when the worker's
environment agrees with its own on everything its libraries read when imported: what
they read through os.environ, recorded as they were imported, and the variables read
below Python (thread pools, devices). Any other worker is started fresh, so that no
test's worker runs with settings its libraries never saw."""

from __future__ import annotations

import pytest

from tests.celery_harness import fork_server
from tests.worker_zygote import READ_AT_IMPORT


@pytest.fixture(scope="module")
def server():
    return fork_server()


def test_what_the_libraries_read_at_import_is_recorded(server) -> None:
    # Read in Python by transformers' hub client and by Celery's worker modules.
    assert {"HF_HUB_OFFLINE", "CELERY_WORKER_REVOKES_MAX", "PSYCOPG_IMPL"} <= server.read_at_import
    # The project's own settings are not read before a worker's environment is set.
    assert not {key for key in server.read_at_import if key.startswith(("GYM_", "DJANGO_"))}
    assert "DATABASE_URL" not in server.read_at_import


@pytest.mark.parametrize(
    ("key", "forked"),
    [
        ("GYM_RUN_HOLD_DIR", True),  # the project's settings: read after the fork
        ("CELERY_TASK_HARD_TIME_LIMIT", True),
        ("HF_HUB_OFFLINE", False),  # read through os.environ at import
        ("CELERY_WORKER_REVOKES_MAX", False),
        ("OMP_NUM_THREADS", False),  # read below Python, by OpenMP
        ("MKL_NUM_THREADS", False),
    ],
)
def test_a_worker_is_forked_only_with_what_the_imports_read(server, key, forked) -> None:
    assert server.imported_as(server.env)
    changed = {**server.env, key: server.env.get(key, "") + "7"}
    assert server.imported_as(changed) is forked
    if key.startswith(READ_AT_IMPORT) or key in server.read_at_import:
        assert server.imported_as({k: v for k, v in server.env.items() if k != key}) is (
            key not in server.env
        )
