"""Integration: the site in the shape of many machines. The web role (gunicorn), a
storing worker, celery beat and two GPU workers each have a var folder, a model folder,
a training folder and an artifact cache of their own, and see none of the others'; they
share only the database, Redis and a real S3 server (SeaweedFS), and no results folder.
Where the machine lets a process have a mount namespace of its own (`unshare --mount`),
each role runs in one in which the other roles' folders are empty and read-only; where it
does not, the roles only have separate roots. A corpus uploaded to the web role over HTTP
trains on GPU worker A; A is killed (SIGKILL) after a checkpoint and GPU worker B resumes
the training from that checkpoint in the store, and evaluates the checkpoints; a model
uploaded as a tar.gz and one uploaded as an ARPA file are checked and scored on a suite,
a minimal-pair set and a probing task, asked for over HTTP. Each run is done once, beat's
sweep runs on the storing worker, and no row, payload or answer names a path of any
role's folders."""

from __future__ import annotations

import io
import json
import re
import secrets
import shlex
import shutil
import socket
import subprocess
import sys
import tarfile
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from django.test import override_settings
from rest_framework.authtoken.models import Token

from evaluations.models import Evaluation, LanguageModel, PairEvaluation, ProbingRun
from evaluations.runs import lifecycle as runs
from evaluations.training import services, stored
from evaluations.training.models import TrainingRun
from evaluations.training.options import CHECKPOINT_PREFIX
from gym import artifacts
from suites.syntaxgym.services import suite_import
from tests.artifacts.conftest import s3_settings
from tests.celery_harness import (
    redelivery_env,
    role_environment,
    spawn,
    stop_group,
    until,
    wait_finished,
)
from tests.conftest import EXAMPLES
from tests.scoring.test_ngram import TINY_ARPA
from tests.training.conftest import example_pair_set, example_probing_task, sample_sentences

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The roles, each a machine of its own.
ROLES = ("web", "storing", "beat", "gpu-a", "gpu-b")


def _stored_checkpoints(folder: str) -> list[int]:
    """The tokens of each checkpoint of a training stored with its training state and
    its manifest: what another machine can resume from."""
    found = []
    for key in artifacts.list_prefix(f"{stored.prefix(folder)}/{stored.STATES}"):
        name = key.split("/")[-2]
        manifest = f"{stored.checkpoint_key(folder, name)}/manifest.json"
        if name.removeprefix(CHECKPOINT_PREFIX).isdigit() and artifacts.exists(manifest):
            found.append(int(name.removeprefix(CHECKPOINT_PREFIX)))
    return sorted(found)


def _role(root: Path, name: str) -> dict[str, str]:
    """A machine's own folders: nothing of another role's is on its disk."""
    home = root / name
    return {
        "GYM_VAR_DIR": str(home / "var"),
        "GYM_MODEL_DIRS": str(home / "models"),
        "GYM_TRAINING_DIR": str(home / "trained"),
        "GYM_CORPUS_DIR": str(home / "corpora"),
        "GYM_UPLOADED_MODELS_DIR": str(home / "uploads"),
        "GYM_ARTIFACT_CACHE_DIR": str(home / "cache"),
        "GYM_ARTIFACTS_DIR": str(home / "no-local-store"),
        "GYM_RUN_RESULTS_DIR": "",
    }


def _hiding(folders: Sequence[Path]) -> list[str]:
    """A launcher (tests.celery_harness.spawn) that runs its command in a mount namespace
    of its own, in which each of `folders` is an empty read-only tmpfs: what is in them
    cannot be read, and nothing can be written there."""
    mounts = "".join(
        f"mount -t tmpfs -o ro,size=4k gym-hidden {shlex.quote(str(folder))} && "
        for folder in folders
    )
    return ["unshare", "--mount", "--propagation", "private", "sh", "-c", mounts + 'exec "$@"']


def _namespaces_work(folder: Path) -> bool:
    """Can this machine hide a folder from a process as `_hiding` does? (Root can; an
    unprivileged user, or a container without CAP_SYS_ADMIN, may not.)"""
    if shutil.which("unshare") is None:
        return False
    (folder / "hidden").mkdir(parents=True)
    (folder / "hidden" / "file").touch()
    try:
        probe = subprocess.run(
            [
                *_hiding([folder / "hidden"]),
                "hide",
                "test",
                "!",
                "-e",
                str(folder / "hidden" / "file"),
            ],
            capture_output=True,
            timeout=60,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return probe.returncode == 0


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class Site:
    """The web role as a script sees it: HTTP with a user's API token, and nothing
    else. Every answer's text is kept, to look for paths in."""

    def __init__(self, url: str, token: str) -> None:
        self.url = url
        self.token = token
        self.answers: list[str] = []
        # Straight to 127.0.0.1, whatever proxy the environment names.
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def request(
        self, method: str, path: str, body: bytes | None = None, content_type: str = ""
    ) -> tuple[int, Any]:
        headers = {"Authorization": f"Token {self.token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(self.url + path, data=body, method=method, headers=headers)
        try:
            with self.opener.open(request, timeout=300) as response:
                status, text = response.status, response.read().decode()
        except urllib.error.HTTPError as error:
            status, text = error.code, error.read().decode()
        self.answers.append(text)
        try:
            return status, json.loads(text)
        except ValueError:
            return status, text

    def get(self, path: str) -> tuple[int, Any]:
        return self.request("GET", path)

    def post_json(self, path: str, data: object) -> tuple[int, Any]:
        return self.request("POST", path, json.dumps(data).encode(), "application/json")

    def upload(self, path: str, data: bytes, filename: str) -> tuple[int, Any]:
        """`data` as the multipart form's `file`, as a browser sends a file."""
        boundary = uuid.uuid4().hex
        head = (
            f"--{boundary}\r\n"
            f'Content-Disposition: form-data; name="file"; filename="{filename}"\r\n'
            "Content-Type: application/octet-stream\r\n\r\n"
        )
        body = head.encode() + data + f"\r\n--{boundary}--\r\n".encode()
        return self.request("POST", path, body, f"multipart/form-data; boundary={boundary}")


def _answers(site: Site) -> bool:
    try:
        return site.opener.open(site.url + "/api/models/", timeout=10).status == 200
    except OSError:
        return False


def _serve(process: subprocess.Popen[bytes], log: Path, site: Site, timeout: float = 180) -> None:
    """Until gunicorn answers (what it did, not how fast)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"the web role exited: {log.read_text()[-3000:]}")
        if _answers(site):
            return
        time.sleep(0.5)
    raise RuntimeError(f"the web role did not answer in {timeout}s: {log.read_text()[-3000:]}")


@pytest.fixture
def roles(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], Path]]]:
    """start(name, command, env, launcher) starts a role's process (not a worker: the
    `workers` fixture starts those) and answers it and its log; every one started is
    stopped after the test, the last started first."""
    started: list[subprocess.Popen[bytes]] = []

    def start(
        name: str, command: list[str], env: dict[str, str], launcher: Sequence[str]
    ) -> tuple[subprocess.Popen[bytes], Path]:
        log = tmp_path / f"{name}.log"
        process = spawn(command, env, log, launcher)
        started.append(process)
        return process, log

    yield start
    for process in reversed(started):
        stop_group(process)


def _tar_gz(folder: Path) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=f"home-model/{path.name}")
    return out.getvalue()


def _upload(site: Site, data: bytes, filename: str) -> LanguageModel:
    status, answer = site.upload("/api/models/", data, filename)
    assert status in (201, 202), answer
    return LanguageModel.objects.get(name=answer["name"])


def _ready(model: LanguageModel, timeout: float = 300) -> LanguageModel:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        model.refresh_from_db()
        if model.status != LanguageModel.Status.CHECKING:
            break
        time.sleep(0.3)
    assert model.status == LanguageModel.Status.READY, (model.status, model.reason)
    return model


def test_many_machines_share_only_the_services_and_the_store(
    seaweed,
    redis_broker,
    workers,
    roles,
    alice,
    pace,
    settings,
    tmp_path,
    tiny_gpt2,
    record_property,
) -> None:
    machines = tmp_path / "machines"
    homes = {name: machines / name for name in ROLES}
    for home in homes.values():
        (home / "var").mkdir(parents=True)  # there before any role hides it from another
    namespaces = _namespaces_work(tmp_path / "probe")
    isolation = "mount namespaces" if namespaces else "separate roots"
    record_property("isolation", isolation)
    print(f"roles isolated by {isolation}")

    def launcher(name: str) -> list[str]:
        """`name`'s process in a namespace without the other roles' folders, if it can be."""
        if not namespaces:
            return []
        return [*_hiding([homes[other] for other in ROLES if other != name]), name]

    store = s3_settings(seaweed, f"site-{tmp_path.name}")
    url = str(store["GYM_ARTIFACTS_URL"])
    timing = {**redelivery_env(settings, pace), "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    # What every role shares: the store, one secret key, the same timing.
    shared = {
        **seaweed.settings(prefix=url.split("/", 3)[3]),
        **timing,
        "SECRET_KEY": secrets.token_urlsafe(50),
    }
    # This process reads rows and builds payloads, with folders that are no role's.
    reader = _role(machines, "reader")
    with override_settings(
        **store,
        GYM_CORPUS_DIR=Path(reader["GYM_CORPUS_DIR"]),
        GYM_TRAINING_DIR=reader["GYM_TRAINING_DIR"],
        GYM_UPLOADED_MODELS_DIR=reader["GYM_UPLOADED_MODELS_DIR"],
        GYM_MODEL_DIRS=[Path(reader["GYM_MODEL_DIRS"])],
        GYM_ARTIFACT_CACHE_DIR=Path(reader["GYM_ARTIFACT_CACHE_DIR"]),
        GYM_RUN_RESULTS_DIR="",
    ):
        storing = workers(
            "celery", launcher=launcher("storing"), **shared, **_role(machines, "storing")
        )
        gpu_a = workers("gpu", launcher=launcher("gpu-a"), **shared, **_role(machines, "gpu-a"))
        # Beat sends the sweep often enough to be seen doing it in this test.
        schedule = homes["beat"] / "var" / "celerybeat-schedule"
        beat_env = role_environment(
            **shared, **_role(machines, "beat"), GYM_SWEEP_EVERY_SECONDS="15"
        )
        beat, beat_log = roles(
            "beat",
            [sys.executable, "-m", "celery", "-A", "gym", "beat", "--loglevel", "INFO"]
            + ["--schedule", str(schedule)],
            beat_env,
            launcher("beat"),
        )
        # The web role as gym/embedded.py starts it, with one process (two cores here).
        port = _free_port()
        web, web_log = roles(
            "web",
            [sys.executable, "-m", "gunicorn", "gym.wsgi", "--bind", f"127.0.0.1:{port}"]
            + ["--workers", "1", "--threads", "4", "--timeout", "300", "--graceful-timeout"]
            + ["5", "--no-control-socket"],
            role_environment(**shared, **_role(machines, "web")),
            launcher("web"),
        )
        token, _ = Token.objects.get_or_create(user=alice)  # committed: a transaction test
        site = Site(f"http://127.0.0.1:{port}", token.key)
        _serve(web, web_log, site)
        until("beat to start", lambda: "beat: Starting..." in beat_log.read_text(), timeout=120)
        assert beat.poll() is None, beat_log.read_text()[-3000:]

        # 1. A corpus uploaded to the web role; a training run on GPU worker A.
        text = "\n".join(sample_sentences("tree_depth")) + "\n"
        status, answer = site.request(
            "POST", "/api/corpora/?filename=book.txt", text.encode(), "text/plain"
        )
        assert status == 201, answer
        suite = suite_import(
            source=(EXAMPLES / "agreement_local.json").read_text(), owner=None
        ).suite
        pace.hold()
        status, answer = site.post_json(
            "/api/training-runs/",
            {
                "corpus": "book",
                "name": "book-tiny",
                "kind": "causal",
                "options": {"preset": "tiny", "steps": 8, "checkpoints": 4, "micro_batch": 4},
                "suites": [suite.name],
            },
        )
        assert status == 201, answer
        run = TrainingRun.objects.get(pk=answer["id"])
        run = pace.wait_held(run, timeout=180)
        pace.release()
        deadline = time.monotonic() + 180
        while not any(c["tokens"] == 256 for c in run.checkpoints):
            assert time.monotonic() < deadline, "no checkpoint was reported"
            time.sleep(0.1)
            run.refresh_from_db()
        pace.hold()

        # 2. Worker A's machine dies; worker B, which has never seen A's folders, resumes.
        gpu_a.kill()
        # The checkpoints A stored whole (its state and its manifest) before it died: B
        # must resume from the last of them, not from zero nor from an earlier one.
        kept = _stored_checkpoints(TrainingRun.objects.get(pk=run.pk).store_folder)
        assert kept, "worker A stored no checkpoint before it was killed"
        pace.release()
        workers("gpu", launcher=launcher("gpu-b"), **shared, **_role(machines, "gpu-b"))
        run = wait_finished(TrainingRun, run.pk, what="the resumed training", timeout=400)
        assert run.status == "done", run.error
        per_step = run.checkpoints[-1]["tokens"] // 8  # the last one is at the last step
        assert run.summary["resumed_from_step"] == max(kept) // per_step, (kept, run.summary)
        assert [c["tokens"] for c in run.checkpoints] == [256, 512, 1024, 2048]
        on_b = homes["gpu-b"] / "trained" / "book-tiny"
        assert (on_b / "model.safetensors").is_file()
        assert not (homes["web"] / "trained" / "book-tiny").exists()
        if namespaces:
            # What A trained is on its disk, and B's namespace cannot see it; B sees its own.
            on_a = homes["gpu-a"] / "trained" / "book-tiny"
            assert on_a.is_dir()
            assert subprocess.run([*launcher("gpu-b"), "test", "-e", str(on_a)]).returncode == 1
            assert subprocess.run([*launcher("gpu-b"), "test", "-e", str(on_b)]).returncode == 0

        # 3. Two uploaded models, checked on B, asked for on three kinds of benchmark.
        home = _ready(_upload(site, _tar_gz(tiny_gpt2), "home-model.tar.gz"))
        ngram = _ready(_upload(site, TINY_ARPA.encode(), "home.arpa"))
        pairs, probing = example_pair_set(), example_probing_task()
        for path, body in (
            ("/api/evaluations/", {"models": [home.name, ngram.name], "suites": [suite.name]}),
            ("/api/pairs/evaluations/", {"models": [home.name, ngram.name], "sets": [pairs.name]}),
            ("/api/probing-runs/", {"models": [home.name], "task": probing.name}),
        ):
            status, answer = site.post_json(path, body)
            assert status == 201, (path, answer)

        # 4. Every run is done, once: the checkpoints' and the finished model's (asked for
        # by the training run), and the uploads'.
        finished = []
        for model in (Evaluation, PairEvaluation, ProbingRun):
            for pk in model.objects.values_list("pk", flat=True):
                finished.append(
                    wait_finished(model, pk, what=f"{model.__name__} {pk}", timeout=400)
                )
        assert all(r.status == "done" for r in finished), [
            (type(r).__name__, r.model.name, r.error) for r in finished if r.status != "done"
        ]
        suites_done = Evaluation.objects.values_list("model__name", flat=True)
        assert sorted(suites_done) == sorted(
            ["book-tiny", "book-tiny-256", "book-tiny-512", "book-tiny-1024", home.name, ngram.name]
        )
        assert PairEvaluation.objects.count() == 2 and ProbingRun.objects.count() == 1

        # 5. Beat's sweep was sent and done on the storing worker, across machines.
        until(
            "a sweep sent by beat and done by the storing worker",
            lambda: (
                "Sending due task sweep runs" in beat_log.read_text()
                and re.search(r"Task runs\.sweep\[[^\]]+\] succeeded", storing.log.read_text())
            ),
            timeout=120,
        )
        assert beat.poll() is None and web.poll() is None

        # 6. No row, no payload and no answer names a path of a machine's folders.
        for registered in LanguageModel.objects.all():
            assert str(machines) not in registered.source, registered.source
        for kind, rows in (
            ("training", TrainingRun.objects.all()),
            ("suite", Evaluation.objects.all()),
            ("pairs", PairEvaluation.objects.all()),
            ("probing", ProbingRun.objects.all()),
        ):
            for row in rows:
                payload = json.dumps(runs.kind_named(kind).build_payload(row), default=str)
                assert str(machines) not in payload, (kind, payload[:500])
        assert services.training_payload(run)["folder"] == "book-tiny"
        for path in (f"/api/training-runs/{run.pk}/", "/api/models/", "/api/runs/"):
            status, answer = site.get(path)
            assert status == 200, (path, answer)
        for answer in site.answers:
            assert str(machines) not in answer, answer[:500]


def test_the_compose_file_has_the_same_shape() -> None:
    import yaml

    from tests.conftest import REPO

    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    services = compose["services"]
    roles = ["web", "worker", "beat", "gpu-worker-1", "gpu-worker-2"]
    assert set(roles) | {"postgres", "redis", "objects"} == set(services)
    for role in roles:
        env = services[role]["environment"]
        assert env["GYM_ARTIFACTS_URL"].startswith("s3://"), role
        assert env["AWS_ENDPOINT_URL"] == "http://objects:8333", role
        assert env["GYM_RUN_RESULTS_DIR"] == "", role
    mounted = [
        (role, volume.split(":")[0])
        for role in roles
        for volume in services[role].get("volumes", [])
    ]
    names = [volume for _role, volume in mounted]
    assert len(names) == len(set(names)), f"a volume shared between roles: {mounted}"
    assert "gym.object_store" in services["objects"]["command"]
