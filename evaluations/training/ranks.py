"""One process of a causal training on several devices, as torch's elastic launcher
(`python -m torch.distributed.run`, torchrun) starts it: `python -m
evaluations.training.ranks JOB_DIR`. The process that asked for the training
(`causal._train_parallel`) wrote the job there and reads back what rank 0 reports; no
Django, and nothing shared but that folder.

JOB_DIR holds `job.json` (the folder trained in, the options, the start time, the threads
the CPU ranks share, the pid of the process to end with), `tokenizer/`, and, as the
training goes, `reports.jsonl` (rank 0's steps, checkpoints and summary, and any rank's
error, one JSON object a line) and `STOP` (the asking process's stop request)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from evaluations.training import causal

JOB = "job.json"
REPORTS = "reports.jsonl"
STOP = "STOP"
TOKENIZER = "tokenizer"


class Reports:
    """Rank 0's reports (and any rank's error), appended to the job's file a line at a
    time and flushed, so that the asking process reads whole lines as they come."""

    def __init__(self, job_dir: Path) -> None:
        self.path = job_dir / REPORTS
        self._lock = threading.Lock()

    def put(self, kind: str, body: Any) -> None:
        line = json.dumps({"kind": kind, "body": body}, default=str) + "\n"
        with self._lock, self.path.open("a", encoding="utf-8") as out:
            out.write(line)
            out.flush()


def checkpoint_body(point: causal.Checkpoint) -> dict[str, Any]:
    return {**asdict(point), "path": str(point.path)}


def _end_with(pid: int) -> None:
    """End this process (no clean-up: nobody is left to hear of it) as soon as process
    `pid` (the one that asked for the training) is gone, checked by a daemon thread. A
    worker killed outright (SIGKILL) cannot end its launcher or its ranks; they leave."""

    def watch() -> None:
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                os._exit(1)
            except PermissionError:
                pass  # alive, another user's (not ours): keep watching
            time.sleep(causal.POLL_SECONDS)

    threading.Thread(target=watch, name="asker-watch", daemon=True).start()


def _train_here(job_dir: Path, job: dict[str, Any], rank: int, size: int) -> None:
    from transformers import AutoTokenizer

    options = causal.options_from_dict(job["options"], job["objective"])
    reports = Reports(job_dir)
    lead = rank == 0
    stop_file = job_dir / STOP
    tokenizer = AutoTokenizer.from_pretrained(job_dir / TOKENIZER)
    with causal.training_precision(options.device):
        summary = causal._train(
            Path(job["out_dir"]),
            options,
            tokenizer,
            float(job["started"]),
            on_step=(lambda entry: reports.put("step", entry)) if lead else None,
            on_checkpoint=(lambda point: reports.put("checkpoint", checkpoint_body(point)))
            if lead
            else None,
            should_stop=stop_file.exists if lead else None,
            group=causal._Group(rank, size),
        )
    if lead and summary is not None:
        reports.put("summary", asdict(summary))


def main(job_dir: Path) -> None:
    """The rank torchrun's environment names (RANK, WORLD_SIZE, LOCAL_RANK, and the
    rendezvous of the process group in MASTER_ADDR, MASTER_PORT): NCCL on GPUs (one a
    rank), gloo on the CPU (the cores shared). An error is reported before it ends the
    process with code 1, which ends the launcher and the other ranks."""
    job = json.loads((job_dir / JOB).read_text(encoding="utf-8"))
    rank, size = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    _end_with(int(job["watch"]))
    device = str(job["options"]["device"])
    try:
        if device == "cuda":
            torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        else:
            torch.set_num_threads(max(1, int(job["threads"]) // size))
        torch.distributed.init_process_group("nccl" if device == "cuda" else "gloo")
        try:
            _train_here(job_dir, job, rank, size)
            # Every rank leaves the group together: a rank that tears its group down while
            # another still holds it (rank 0 saves and evaluates after the last step) can
            # have gloo's threads abort the process.
            torch.distributed.barrier()
        finally:
            torch.distributed.destroy_process_group()
    except BaseException as exc:  # noqa: BLE001 - every error is reported, then the rank ends
        known = isinstance(exc, causal.CausalTrainingError)
        Reports(job_dir).put(
            "error", [rank, known, f"{type(exc).__name__}: {exc}", traceback.format_exc()]
        )
        sys.exit(1)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
