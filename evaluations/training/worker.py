"""The training worker: trains on a GPU worker (or the CPU) from the payload alone, never
the database. Checkpoints and the loss curve are reported on the default queue as they
come (`evaluations.training.tasks`); the results go to the store like every run's.

A re-delivered task (its worker died) finds the checkpoints in the run's folder and
resumes from the last one; cancelling writes STOP into the folder or a key in the
shared cache, which the worker reads between steps."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evaluations.training import stored

if TYPE_CHECKING:
    from evaluations.training.causal import CausalSummary, Checkpoint

log = logging.getLogger(__name__)

KIND = "training"
STOP_FILE = "STOP"
# How often the worker looks for a stop request and sends its loss curve.
REPORT_EVERY_SECONDS = 2.0
# How often the loss log so far is stored for the run's pages (and with each checkpoint).
LOSS_PUSH_SECONDS = 30.0


def _send(task: Any, *args: Any, best_effort: bool = False) -> None:
    from evaluations.runs import tasks

    if best_effort:
        try:
            task.apply_async(args=list(args), queue=tasks.DEFAULT_QUEUE, retry=False)
        except Exception as exc:  # noqa: BLE001 - a lost report costs a point of the curve
            log.warning("training report not sent: %s", exc)
        return
    tasks._hand_over(task, *args)


def _stop_requested(run_id: int, attempt: int, out_dir: Path) -> bool:
    marker = out_dir / STOP_FILE
    if marker.is_file() and marker.read_text().strip() == str(attempt):
        return True
    try:
        from django.core.cache import cache

        from evaluations.training.services import stop_key

        return cache.get(stop_key(run_id)) == attempt
    except Exception:  # noqa: BLE001 - no shared cache: the file is the signal
        return False


def run_folder(payload: dict[str, Any]) -> Path:
    """The run's folder on this worker: its name under this machine's training folder
    (what is kept there is also in the artifact store)."""
    from evaluations.language_models.registry import training_dir

    named = payload.get("folder", payload.get("out_dir", ""))  # out_dir: queued before the store
    name = Path(str(named)).name
    if not name or name in (".", ".."):
        raise ValueError(f"the payload names no run folder: {named!r}")
    return training_dir() / name


def run_training(payload: dict[str, Any], progress: Callable[[int, int], None]) -> dict[str, Any]:
    from evaluations.training.data import CorpusSource
    from gym import artifact_cache

    source = CorpusSource.from_payload(payload["corpus"], fetch=artifact_cache.fetch_file)
    out_dir = run_folder(payload)
    if payload["kind"] == "ngram":
        return _ngram(payload, source, out_dir, progress)
    return _causal(payload, source, out_dir, progress)


def _ngram(
    payload: dict[str, Any], source: Any, out_dir: Path, progress: Callable[[int, int], None]
) -> dict[str, Any]:
    from evaluations.training import ngram

    options = payload["options"]
    run_id, attempt = int(payload["run"]), int(payload["attempt"])
    asked = {"at": 0.0}

    def should_stop() -> bool:  # a cancel: between the trainer's stages, every 2 s at most
        now = time.monotonic()
        if now - asked["at"] < REPORT_EVERY_SECONDS and asked["at"]:
            return False
        asked["at"] = now
        return _stop_requested(run_id, attempt, out_dir)

    progress(0, 1)
    try:
        summary = ngram.train_ngram(
            source.training(),
            out_dir,
            order=int(options["order"]),
            min_count=int(options["min_count"]),
            memory_mb=options.get("memory_mb"),
            disk_mb=options.get("disk_mb"),
            heldout=source.validation(),
            should_stop=should_stop,
        )
    except ngram.NgramTrainingStopped:
        # Cancelled: the trainer removed its scratch folder; the store ignores a
        # cancelled run's results, as it does a stopped causal run's.
        return {"kind": "ngram", "summary": {"stopped": True}, "checkpoints": [], "log": []}
    progress(1, 1)
    model_key = stored.push_file(payload["store"], out_dir, ngram.ARPA_NAME)
    return {
        "kind": "ngram",
        "summary": asdict(summary),
        "checkpoints": [],
        "log": [],
        "model_key": model_key,
    }


def causal_options(raw: dict[str, Any], device: str, kind: str = "causal") -> Any:
    """The options of a run's stored options, on `device`: CausalOptions, or for a
    masked run MaskedOptions (with its masking)."""
    from evaluations.training import causal

    masking: dict[str, Any] = {}
    if kind == causal.MaskedOptions.objective:
        masking = {
            "mask_probability": float(raw["mask_probability"]),
            "whole_word_masking": bool(raw["whole_word_masking"]),
        }
    return causal.options_class(kind)(
        shape=causal.ModelShape(**raw["shape"]),
        steps=int(raw["steps"]),
        batch_tokens=int(raw["batch_tokens"]),
        micro_batch=int(raw["micro_batch"]),
        learning_rate=float(raw["learning_rate"]),
        min_lr_ratio=float(raw["min_lr_ratio"]),
        warmup_steps=int(raw["warmup_steps"]),
        weight_decay=float(raw["weight_decay"]),
        grad_clip=float(raw["grad_clip"]),
        seed=int(raw["seed"]),
        checkpoints=int(raw["checkpoints"]),
        keep_states=int(raw.get("keep_states", 0)),
        base_model=str(raw.get("base_source", "")),
        tokenizer=str(raw.get("tokenizer", "bpe")),
        tokenizer_source=str(raw.get("tokenizer_source", "")),
        save_every=int(raw.get("save_every", 0)),
        retention=str(raw.get("retention", "all")),
        keep_last=int(raw.get("keep_last", 0)),
        device=device,
        **masking,
    )


def _causal(
    payload: dict[str, Any], source: Any, out_dir: Path, progress: Callable[[int, int], None]
) -> dict[str, Any]:
    from evaluations.training import causal, tasks

    run_id, attempt = int(payload["run"]), int(payload["attempt"])
    options = _device_options(payload)
    pending: list[dict[str, Any]] = []
    last = {"report": time.monotonic(), "stop": False, "loss": time.monotonic()}
    pushed = {"inputs": False}
    store = str(payload["store"])
    # Killed on another machine: its last checkpoint comes from the store.
    stored.pull_for_resume(store, out_dir, causal.STATE_NAME)

    def on_step(entry: dict[str, Any]) -> None:
        pending.append({k: entry[k] for k in ("step", "tokens", "loss", "lr")})
        now = time.monotonic()
        if now - last["report"] >= REPORT_EVERY_SECONDS:
            last["report"] = now
            _send(tasks.loss_report, KIND, run_id, attempt, list(pending), best_effort=True)
            pending.clear()
            last["stop"] = _stop_requested(run_id, attempt, out_dir)
        if now - last["loss"] >= LOSS_PUSH_SECONDS:
            last["loss"] = now
            stored.push_loss_log(store, out_dir)
        progress(entry["step"], options.steps)

    def on_checkpoint(point: causal.Checkpoint) -> None:
        # In the store before it is reported: any worker may evaluate it, and a worker
        # on another machine may resume from it.
        if not pushed["inputs"]:
            pushed["inputs"] = bool(stored.push_file(store, out_dir, causal.INPUTS_NAME))
        key = stored.push_checkpoint(store, point.path, causal.STATE_NAME)
        for name in point.removed:
            stored.drop_checkpoint(store, str(name))
        stored.prune_states(store, out_dir, causal.STATE_NAME)
        stored.push_loss_log(store, out_dir)
        evaluation = {
            "step": point.step,
            "tokens": point.tokens,
            "validation_loss": point.validation_loss,
        }
        record = _checkpoint_record(point, key)
        _send(tasks.checkpoint, KIND, run_id, attempt, record, [*pending, evaluation])
        pending.clear()

    def should_stop() -> bool:
        return bool(last["stop"])

    summary = causal.train_causal(
        source.training,
        source.validation,
        out_dir,
        options,
        on_step=on_step,
        on_checkpoint=on_checkpoint,
        should_stop=should_stop,
    )
    return _causal_result(summary, options, store, out_dir)


def _device_options(payload: dict[str, Any]) -> Any:
    """The run's options on this worker's device: on CUDA, every visible GPU that the
    step's micro-batches split evenly across (a run trains on the same batches, to the
    same model, however many a worker has)."""
    import torch

    from evaluations.training import causal

    device = "cuda" if torch.cuda.is_available() else "cpu"
    options = causal_options(payload["options"], device, payload["kind"])
    if options.device == "cuda":
        options.devices = causal.usable_devices(options.accumulation, torch.cuda.device_count())
        if options.devices > 1:
            log.info("run %s trains on %d GPUs", payload["run"], options.devices)
    return options


def _checkpoint_record(point: Checkpoint, key: str) -> dict[str, Any]:
    """What the checkpoint task records of a checkpoint stored under `key`."""
    return {
        "step": point.step,
        "tokens": point.tokens,
        "folder": point.path.name,
        "train_loss": point.train_loss,
        "validation_loss": point.validation_loss,
        "bytes": point.bytes,
        "scheduled": point.scheduled,
        "removed": point.removed,
        "key": key,
    }


def _causal_result(
    summary: CausalSummary, options: Any, store: str, out_dir: Path
) -> dict[str, Any]:
    """The finished (or stopped) run's loss log and model in the store, and the result
    the storing worker records."""
    from evaluations.training import causal

    model_key = None
    stored.push_loss_log(store, out_dir)
    if not summary.stopped:
        causal.remove_training_data(out_dir)
        model_key = stored.push_model(store, out_dir)
    facts = asdict(summary)
    # The row keeps a thinned log; the whole one is the folder's loss.jsonl.
    log_entries = causal.thin_log(facts.pop("log"), options.steps)
    checkpoints = [
        {**c, "key": stored.checkpoint_key(store, str(c["folder"]))}
        for c in facts.pop("checkpoints")
    ]
    return {
        "kind": options.objective,
        "summary": facts,
        "checkpoints": checkpoints,
        # The whole curve: reports lost on the way are made good here.
        "log": log_entries,
        "model_key": model_key,
    }
