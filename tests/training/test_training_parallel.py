"""Causal training on several devices (DistributedDataParallel), tested on the CPU with
gloo and two processes: the same steps, micro-batch and token batch give the same losses
and model as one process, a stopped run resumes to the same model (in two processes or
one), and a failing process is a clear error in the process that started them."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest
import torch
from django.core.management import CommandError
from safetensors.torch import load_file

from evaluations.training import causal
from evaluations.training.data import corpus_file
from tests.training.conftest import sentences_file, train_causal

pytestmark = [pytest.mark.usefixtures("one_torch_thread"), pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]

# 2 sequences of 64 tokens a pass, 512 tokens a step: 4 micro-batches, 2 on each rank.
STEPS = ("--steps", "6", "--micro-batch", "2", "--batch-tokens", "512", "--checkpoints", "3")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    return sentences_file(tmp_path_factory.mktemp("corpus") / "past_present.txt", "past_present")


def train(corpus: Path, out: Path, *extra: str) -> str:
    return train_causal(corpus, out, "--preset", "tiny", *STEPS, *extra)


def info(out: Path) -> dict:
    return json.loads((out / causal.INFO_NAME).read_text())


def losses(out: Path) -> list[float]:
    return [e["loss"] for e in info(out)["log"] if "loss" in e]


def assert_same_model(a: Path, b: Path) -> None:
    first, second = load_file(str(a / "model.safetensors")), load_file(str(b / "model.safetensors"))
    assert first.keys() == second.keys()
    for name, tensor in first.items():
        assert torch.allclose(second[name], tensor, atol=1e-5), name


@pytest.fixture(scope="module")
def one(corpus, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("one") / "model"
    train(corpus, out)
    return out


def test_two_processes_train_the_model_one_process_trains(corpus, one, tmp_path) -> None:
    two = tmp_path / "two"
    printed = train(corpus, two, "--devices", "2")
    assert f"model in {two}: 6 steps, 3,072 tokens" in printed
    assert info(two)["options"]["devices"] == 2
    assert [c["tokens"] for c in info(two)["checkpoints"]] == [512, 1024, 3072]
    # Each rank's loss is the mean over its two micro-batches; all micro-batches hold
    # 2 x 64 tokens, so the mean of the ranks' losses is the loss of the step's batch.
    assert losses(two) == pytest.approx(losses(one), rel=1e-4)
    assert_same_model(one, two)

    # That batch is the same 8 blocks in both: the first step's loss is the untrained
    # model's loss on the first 8 blocks of the seeded order, all at once.
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(two / causal.DATA_DIR)
    torch.manual_seed(0)
    model = causal.build_model(causal.PRESETS["tiny"], tokenizer)
    blocks = causal._blocks(two / causal.DATA_DIR / "train.bin", 64)
    ids = torch.from_numpy(blocks[causal.BlockOrder(len(blocks), 0).take(8)].astype("int64"))
    with torch.no_grad():
        whole = float(causal.lm_loss(model, ids, len(tokenizer)))
    assert losses(two)[0] == pytest.approx(whole, rel=1e-5)
    assert losses(one)[0] == pytest.approx(whole, rel=1e-5)


def test_a_stopped_run_resumes_to_the_same_model(corpus, one, tmp_path) -> None:
    stopped = tmp_path / "stopped"
    printed = train(corpus, stopped, "--devices", "2", "--stop-after-step", "2")
    assert "stopped early: 2 steps" in printed
    assert not (stopped / "model.safetensors").exists()
    # Written once, by rank 0: a complete state in each checkpoint.
    assert (
        sorted(p.name for p in stopped.glob("checkpoint-*/" + causal.STATE_NAME))
        == [causal.STATE_NAME] * 2
    )
    in_one = tmp_path / "resumed-in-one"
    shutil.copytree(stopped, in_one)

    assert "6 steps (resumed at step 2)" in train(corpus, stopped, "--devices", "2")
    assert losses(stopped) == pytest.approx(losses(one), rel=1e-4)
    assert_same_model(one, stopped)
    # The same batches whatever the devices: two processes' checkpoint resumes in one.
    assert "6 steps (resumed at step 2)" in train(corpus, in_one)
    assert_same_model(one, in_one)

    # A damaged training state fails in every process; the error names the file and why.
    state = stopped / "checkpoint-3072" / causal.STATE_NAME
    state.write_bytes(b"not a torch file")
    refused = r"checkpoint-3072/training_state.pt is not a training state Gym wrote, or is dam"
    with pytest.raises(CommandError, match=refused):
        train(corpus, stopped, "--devices", "2")


def _train_asked_to_stop(corpus: str, out: str) -> tuple:
    source = corpus_file(Path(corpus), fraction=0.01, maximum=10_000, seed=0)
    heard: list[int] = []
    points: list[int] = []
    options = causal.CausalOptions(
        shape=causal.PRESETS["tiny"], steps=6, micro_batch=2, batch_tokens=512, devices=2
    )
    summary = causal.train_causal(
        source.training,
        source.validation,
        Path(out),
        options,
        on_step=lambda entry: heard.append(entry["step"]),
        on_checkpoint=lambda point: points.append(point.step),
        should_stop=lambda: True,
    )
    return summary.stopped, summary.steps_done, heard, points


def test_a_stop_request_stops_every_process_of_a_celery_pool_process(corpus, tmp_path) -> None:
    """The training worker runs in a process of Celery's prefork pool (billiard's), which
    multiprocessing would not let start processes of its own: the training starts them
    there. `should_stop` is asked in that process; a stop asked before the start ends the
    training after its first step, as in one process."""
    from billiard.pool import Pool

    pool = cast(Any, Pool)(1)  # billiard is not typed: mypy sees no arguments, no methods
    try:
        result = pool.apply(_train_asked_to_stop, (str(corpus), str(tmp_path / "out")))
    finally:
        pool.terminate()
        pool.join()
    assert result == (True, 1, [1], [1])
    assert info(tmp_path / "out")["steps_done"] == 1


def test_devices_options(corpus, tmp_path) -> None:
    assert [causal.usable_devices(a, n) for a, n in ((4, 3), (1, 8), (8, 8), (6, 4), (4, 0))] == [
        2, 1, 8, 3, 1,
    ]  # fmt: skip
    with pytest.raises(CommandError, match=r"a step's 3 micro-batches do not split evenly "
                       r"across 2 devices: give a batch of tokens that is a multiple of 256"):  # fmt: skip
        train(corpus, tmp_path / "x", "--devices", "2", "--batch-tokens", "384")
    with pytest.raises(CommandError, match="train on 1 device or more; got 0"):
        train(corpus, tmp_path / "x", "--devices", "0")
    with pytest.raises(CommandError, match="--devices all counts GPUs: give --device cuda"):
        train(corpus, tmp_path / "x", "--devices", "all")
    with pytest.raises(CommandError, match="several devices train on cuda .* not on cuda:1"):
        train(corpus, tmp_path / "x", "--devices", "2", "--device", "cuda:1")


def test_the_processes_leave_when_the_process_that_started_them_is_killed(corpus, tmp_path) -> None:
    """A worker killed mid-training (SIGKILL: no chance to end its children) must not
    leave its training processes holding the devices: they are interrupted with it."""
    out = tmp_path / "orphans"
    command = [
        sys.executable, "manage.py", "train", "--corpus", str(corpus), "--kind", "causal",
        "--preset", "tiny", "--steps", "100000", "--micro-batch", "2", "--batch-tokens", "512",
        "--checkpoints", "1", "--save-every", "1", "--devices", "2", "--out", str(out),
    ]  # fmt: skip
    parent = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL)
    try:
        # Training has begun once the first checkpoint is on disk.
        first = out / "checkpoint-512" / causal.STATE_NAME
        for _ in range(600):
            if first.is_file() or parent.poll() is not None:
                break
            time.sleep(0.5)
        assert first.is_file(), parent.poll()
        # torch's launcher (torchrun) and the two ranks it started.
        started = descendants(parent.pid)
        launchers = [pid for pid in started if b"torch.distributed.run" in cmdline(pid)]
        ranks = [
            pid
            for pid in started
            if b"evaluations.training.ranks" in cmdline(pid) and pid not in launchers
        ]
        assert (len(launchers), len(ranks)) == (1, 2)
    finally:
        parent.kill()
        parent.wait()
    for _ in range(600):
        if not any(alive(pid) for pid in ranks + launchers):
            break
        time.sleep(0.5)
    assert not any(alive(pid) for pid in ranks + launchers)
    # What they wrote before is a checkpoint to resume from.
    assert causal.latest_checkpoint(out) is not None


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    found = children(pid)
    for child in list(found):
        try:
            found += descendants(child)
        except FileNotFoundError:
            pass  # gone meanwhile
    return found


def cmdline(pid: int) -> bytes:
    return Path(f"/proc/{pid}/cmdline").read_bytes()


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return False
    return state != "Z"
