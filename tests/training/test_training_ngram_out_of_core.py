"""Out-of-core n-gram training (issue 48): with a budget tiny enough to force many sorted
runs on disk, the model is the in-memory path's to the last digit for orders 2 to 5; the
summary says which path ran, its runs and its disk peak; the scratch folder is gone
after a finished run, a failed one, and a killed one (removed by the next run)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.core.management import CommandError, call_command

from evaluations.training import ngram
from evaluations.training.services import local_folder
from tests.training.conftest import sample_sentences

ROOT = Path(__file__).resolve().parents[2]


def corpus() -> list[str]:
    return sample_sentences("tree_depth")[:300]


def scratch_folders(folder: Path) -> list[Path]:
    return sorted(folder.glob(ngram.SCRATCH_PREFIX + "*"))


@pytest.mark.parametrize("order", [2, 3, 4, 5])
def test_out_of_core_gives_the_in_memory_model(tmp_path: Path, order: int) -> None:
    lines = corpus()
    heldout = lines[:20]
    memory = ngram.train_ngram(
        lines, tmp_path / "memory", order=order, out_of_core=False, heldout=heldout
    )
    # 20,000 bytes: runs of 52 n-grams, chunks of 31 tokens, blocks of 78 rows: 50 or
    # more runs per order, merged in two passes (at most MAX_FAN_IN runs in one).
    disk = ngram.train_ngram(
        lines,
        tmp_path / "disk",
        order=order,
        out_of_core=True,
        memory_bytes=20_000,
        heldout=heldout,
    )
    text = (tmp_path / "memory" / ngram.ARPA_NAME).read_text(encoding="utf-8")
    assert text == (tmp_path / "disk" / ngram.ARPA_NAME).read_text(encoding="utf-8")
    assert memory.counting == "in memory" and memory.runs == 0
    assert disk.counting == "out of core"
    assert disk.runs > ngram.MAX_FAN_IN * (order - 1)  # many runs for every order
    assert disk.temp_disk_peak_bytes > 0
    assert disk.discounts == memory.discounts
    assert disk.heldout == memory.heldout
    assert disk.ngrams == memory.ngrams
    info = json.loads((tmp_path / "disk" / ngram.INFO_NAME).read_text(encoding="utf-8"))
    assert info["counting"] == "out of core"
    assert info["runs"] == disk.runs
    assert info["temp_disk_peak_bytes"] == disk.temp_disk_peak_bytes
    assert scratch_folders(tmp_path / "disk") == []


def test_the_path_is_chosen_by_the_budget(tmp_path: Path) -> None:
    lines = corpus()
    small = ngram.train_ngram(lines, tmp_path / "a", order=3, memory_bytes=10_000)
    large = ngram.train_ngram(lines, tmp_path / "b", order=3, memory_mb=512)
    assert small.counting == "out of core" and small.runs > 0
    assert large.counting == "in memory" and large.memory_mb == 512
    assert ngram.default_memory_mb() >= 1
    a = (tmp_path / "a" / ngram.ARPA_NAME).read_text(encoding="utf-8")
    assert a == (tmp_path / "b" / ngram.ARPA_NAME).read_text(encoding="utf-8")


def test_a_failed_run_leaves_no_scratch(tmp_path: Path) -> None:
    def failing() -> Iterator[str]:
        yield from corpus()
        raise RuntimeError("the corpus broke")

    with pytest.raises(RuntimeError, match="the corpus broke"):
        ngram.train_ngram(failing(), tmp_path, order=3, out_of_core=True, memory_bytes=20_000)
    assert scratch_folders(tmp_path) == []
    assert not (tmp_path / ngram.ARPA_NAME).exists()
    with pytest.raises(ngram.NgramTrainingError, match="no sentences"):
        ngram.train_ngram([], tmp_path, order=3)
    assert scratch_folders(tmp_path) == []


def test_a_cancelled_run_leaves_no_scratch(tmp_path: Path) -> None:
    asked: list[int] = []

    def should_stop() -> bool:
        asked.append(1)
        # Stopped once the second order is counted: runs and tables are on disk by then.
        if len(asked) == 2:
            assert any(scratch_folders(tmp_path)[0].glob("*.bin"))
            return True
        return False

    with pytest.raises(ngram.NgramTrainingStopped):
        ngram.train_ngram(
            corpus(),
            tmp_path,
            order=4,
            out_of_core=True,
            memory_bytes=20_000,
            should_stop=should_stop,
        )
    assert len(asked) == 2
    assert scratch_folders(tmp_path) == []
    assert not (tmp_path / ngram.ARPA_NAME).exists()


KILLED = """
import sys, time
from pathlib import Path
from django.core.management import CommandError, call_command

from evaluations.training import ngram

def lines():
    for i in range(100000):
        yield f"word{i % 50} and word{i % 7}"
        if i == 2000:
            print("started", flush=True)
            time.sleep(600)

ngram.train_ngram(lines(), Path(sys.argv[1]), order=3, out_of_core=True)
"""


def test_a_killed_run_is_cleaned_by_the_next(tmp_path: Path) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED, str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        env={**os.environ, "DJANGO_SETTINGS_MODULE": "gym.settings"},
    )
    assert child.stdout is not None
    assert child.stdout.readline().strip() == b"started"
    left = scratch_folders(tmp_path)
    assert len(left) == 1 and (left[0] / "ids.int32").exists()
    assert (left[0] / "pid").read_text() == str(child.pid)
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=60)
    assert scratch_folders(tmp_path) == left  # SIGKILL runs no finally
    # A scratch folder of a live run is kept: this process's pid stands for one.
    live = tmp_path / (ngram.SCRATCH_PREFIX + "live")
    live.mkdir()
    (live / "pid").write_text(str(os.getpid()))
    ngram.train_ngram(corpus(), tmp_path, order=2)
    assert scratch_folders(tmp_path) == [live]
    assert (tmp_path / ngram.ARPA_NAME).exists()


def test_train_command_memory_budget(tmp_path: Path) -> None:
    lines = sample_sentences("tree_depth")[:400]
    corpus_file = tmp_path / "corpus.tsv"
    corpus_file.write_text("id\ttext\n" + "".join(f"{n}\t{s}\n" for n, s in enumerate(lines)))
    texts = []
    for memory in ("1", "4096"):
        out = tmp_path / f"model-{memory}"
        stdout = io.StringIO()
        train_ngram(
            corpus_file,
            "--order",
            "4",
            "--memory-mb",
            memory,
            "--disk-mb",
            "100",
            "--out",
            str(out),
            stdout=stdout,
        )
        info = json.loads((out / ngram.INFO_NAME).read_text(encoding="utf-8"))
        assert info["memory_mb"] == int(memory) and info["disk_mb"] == 100
        assert f"counted {info['counting']} (budget {int(memory):,} MB" in stdout.getvalue()
        texts.append((out / ngram.ARPA_NAME).read_text(encoding="utf-8"))
        assert scratch_folders(out) == []
    assert texts[0] == texts[1]
    with pytest.raises(CommandError, match="the memory budget must be 1 MB or more; got 0"):
        train_ngram(corpus_file, "--memory-mb", "0", "--out", str(tmp_path / "x"))


@pytest.mark.django_db
def test_a_cancelled_site_run_stops_and_leaves_no_scratch(book_corpus) -> None:
    from evaluations.training import services
    from evaluations.training.worker import STOP_FILE, run_training

    run = services.training_request(
        corpus=book_corpus, name="book-kn3", kind="ngram", options={"order": 3}
    )
    folder = local_folder(run)
    folder.mkdir(parents=True, exist_ok=True)
    # What cancelling writes (services.ask_to_stop) where the worker reads it.
    (folder / STOP_FILE).write_text(f"{run.attempt}\n")
    results = run_training(services.training_payload(run), progress=lambda d, t: None)
    assert results["summary"] == {"stopped": True}
    assert scratch_folders(folder) == []
    assert not (folder / ngram.ARPA_NAME).exists()
    # Not cancelled: the same run trains to its model, its summary saying the path.
    (folder / STOP_FILE).unlink()
    results = run_training(services.training_payload(run), progress=lambda d, t: None)
    assert results["summary"]["counting"] == "in memory"
    assert results["summary"]["memory_mb"] == ngram.default_memory_mb()
    assert (folder / ngram.ARPA_NAME).exists() and scratch_folders(folder) == []


@pytest.mark.parametrize("out_of_core", [False, True])
def test_the_scratch_folder_is_bounded(tmp_path: Path, out_of_core: bool) -> None:
    """A bound under what the run needs stops it before the write that would pass it,
    with a message naming the bound; the scratch is removed and no model is written. A
    bound of exactly its peak lets it finish."""
    lines = corpus()
    free = ngram.train_ngram(
        lines, tmp_path / "free", order=4, out_of_core=out_of_core, memory_bytes=20_000
    )
    peak = free.temp_disk_peak_bytes
    assert peak > 0 and free.disk_mb is None
    for bound in (peak // 2, peak - 1):
        folder = tmp_path / f"bound-{bound}"
        with pytest.raises(ngram.NgramDiskFull, match=r"over the bound of .* MB \(disk_mb\)"):
            ngram.train_ngram(
                lines,
                folder,
                order=4,
                out_of_core=out_of_core,
                memory_bytes=20_000,
                disk_bytes=bound,
            )
        assert scratch_folders(folder) == [] and not (folder / ngram.ARPA_NAME).exists()
    exact = ngram.train_ngram(
        lines,
        tmp_path / "exact",
        order=4,
        out_of_core=out_of_core,
        memory_bytes=20_000,
        disk_bytes=peak,
    )
    assert exact.temp_disk_peak_bytes == peak
    text = (tmp_path / "free" / ngram.ARPA_NAME).read_text(encoding="utf-8")
    assert text == (tmp_path / "exact" / ngram.ARPA_NAME).read_text(encoding="utf-8")
    with pytest.raises(ngram.NgramTrainingError, match="disk bound must be 1 MB or more; got 0"):
        ngram.train_ngram(lines, tmp_path / "zero", order=2, disk_mb=0)


def test_a_disk_without_room_stops_the_run(tmp_path: Path, monkeypatch) -> None:
    """The free space is checked before each write: asked to keep more free than the
    disk has, the run stops at its first write, saying so."""
    monkeypatch.setattr(ngram, "DISK_RESERVE_BYTES", 2**62)
    with pytest.raises(ngram.NgramDiskFull, match="MB free .* free some space"):
        ngram.train_ngram(corpus(), tmp_path, order=3, out_of_core=True, memory_bytes=20_000)
    assert scratch_folders(tmp_path) == [] and not (tmp_path / ngram.ARPA_NAME).exists()


def test_mapped_pages_are_kept_within_the_budget(tmp_path: Path) -> None:
    """Out of core, the pages of the scratch files mapped into the process pass no more
    than their share of the budget for long: `bound()` drops them (they stay on disk)."""
    size = 64 * 2**20
    store = ngram._Store(tmp_path, budget=16 * 2**20)
    array = store.empty(size // 8, "int64")
    array[:] = 7  # every page touched, and dirty
    before = ngram._mapped_bytes()
    store.bound()
    after = ngram._mapped_bytes()
    assert before - after > size // 2, (before, after)
    assert array[:: len(array) // 8].tolist() == [7] * 8  # the data is still there
    assert store.drops == 1
    # Within the limit, nothing is dropped.
    store.bound()
    assert store.drops == 1


def train_ngram(corpus_file: Path, *args: str, **options: Any) -> None:
    """`manage.py train --kind ngram` on `corpus_file`, with more of its arguments."""
    call_command("train", "--corpus", str(corpus_file), "--kind", "ngram", *args, **options)
