from __future__ import annotations

import csv
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from evaluations.management.standalone import StandaloneCommand
from evaluations.probing.extract import POOLINGS
from evaluations.probing.probes import PROBES
from evaluations.probing.run import DEFAULT_SEEDS, MAX_SEEDS, probe_task
from evaluations.scoring.loading import LoadedModel, load_model
from evaluations.scoring.schema import ScoringError
from suites.formats.probing import (
    TASK_TYPES,
    ProbingFile,
    guess_task_type,
    read_probing,
)

SUMMARY_COLUMNS = (
    "task",
    "type",
    "model",
    "pooling",
    "probe",
    "layers",
    "best_layer",
    "va_accuracy",
    "te_accuracy",
    "majority_te_accuracy",
    "length_te_accuracy",
    "frequency_te_accuracy",
    "control_te_accuracy",
    "selectivity",
    "seeds",
    "chance",
)


def _four(value: float | None) -> str:
    return "" if value is None else f"{value:.4f}"


class Command(StandaloneCommand):
    help = (
        "Probe every layer of a language model on SentEval-style probing tasks and write "
        "one JSON per task (per-layer va/te accuracy, chosen hyperparameters, baselines, "
        "the best layer on va and its te confusion matrix) plus summary.csv. Needs no "
        "database: the model is loaded once and reused for every task."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model", required=True, help="hub id or a folder saved with save_pretrained"
        )
        parser.add_argument("--revision", default="", help="hub revision")
        parser.add_argument("--dtype", default="", help="bf16 or fp16 on a GPU (pooling is fp32)")
        parser.add_argument("--device", default="", help="cpu or cuda (default: cuda if present)")
        parser.add_argument(
            "--task",
            action="append",
            required=True,
            metavar="FILE",
            help="a probing file: partition<TAB>label<TAB>sentence per line (repeatable)",
        )
        parser.add_argument(
            "--type",
            choices=TASK_TYPES,
            help="task type of every --task (default: from each file name, e.g. "
            "past_present.txt, else custom)",
        )
        parser.add_argument("--out", required=True, metavar="DIR", help="folder for the results")
        parser.add_argument("--pooling", choices=POOLINGS, default="mean")
        parser.add_argument("--probe", choices=PROBES, default="logreg")
        parser.add_argument(
            "--seeds",
            type=int,
            default=DEFAULT_SEEDS,
            help=f"probes per layer, each with its own seed (1-{MAX_SEEDS}; "
            f"default {DEFAULT_SEEDS}): mean and spread, best layer on the mean va",
        )
        parser.add_argument(
            "--no-control",
            action="store_true",
            help="skip the control task (and so selectivity)",
        )
        parser.add_argument(
            "--mdl", action="store_true", help="also the online code length (MDL) per layer"
        )
        parser.add_argument(
            "--token-budget",
            type=int,
            default=0,
            help="tokens per forward pass (default: engine's)",
        )
        parser.add_argument(
            "--memory-mb",
            type=int,
            default=settings.GYM_PROBING_MEMORY_MB,
            help="vectors above this size (float32) go to float16 files on disk "
            "(default GYM_PROBING_MEMORY_MB)",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if not 1 <= options["seeds"] <= MAX_SEEDS:
            raise CommandError(f"--seeds must be from 1 to {MAX_SEEDS}")
        tasks = self._read_tasks(options["task"], options["type"])
        out = Path(options["out"])
        out.mkdir(parents=True, exist_ok=True)
        try:
            lm = load_model(
                options["model"],
                revision=options["revision"] or None,
                device=options["device"] or None,
                dtype=options["dtype"] or None,
            )
        except ScoringError as exc:
            raise CommandError(str(exc)) from exc
        if not isinstance(lm, LoadedModel):
            # As the probing worker refuses one (evaluations.probing.worker).
            raise CommandError(
                "an n-gram model has no hidden states to probe; choose a causal or masked "
                "transformers model"
            )

        rows: list[dict[str, Any]] = []
        for path, task_type, loaded in tasks:
            started = time.perf_counter()
            try:
                document = probe_task(
                    lm,
                    loaded.instances,
                    task={
                        "name": path.stem,
                        "type": task_type,
                        "file": str(path),
                        "content_hash": loaded.summary.content_hash,
                    },
                    pooling=options["pooling"],
                    probe=options["probe"],
                    seeds=options["seeds"],
                    control=not options["no_control"],
                    mdl=options["mdl"],
                    token_budget=options["token_budget"] or None,
                    memory_limit_bytes=max(0, options["memory_mb"]) * 1024**2,
                    progress=self._progress(path),
                )
            except (ScoringError, ValueError) as exc:
                raise CommandError(f"{path}: {exc}") from exc
            target = out / f"{path.stem}.json"
            target.write_text(
                json.dumps(document, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
            )
            best = document["best"]
            base = document["baselines"]
            rows.append(
                {
                    "task": path.stem,
                    "type": task_type,
                    "model": options["model"],
                    "pooling": options["pooling"],
                    "probe": options["probe"],
                    "layers": len(document["layers"]),
                    "best_layer": document["best_layer"],
                    "va_accuracy": f"{best['va_accuracy']:.4f}",
                    "te_accuracy": f"{best['te_accuracy']:.4f}",
                    "majority_te_accuracy": f"{base['majority']['te_accuracy']:.4f}",
                    "length_te_accuracy": f"{base['length']['te_accuracy']:.4f}",
                    "frequency_te_accuracy": _four(base["frequency"]["te_accuracy"]),
                    "control_te_accuracy": _four((best.get("control") or {}).get("te_accuracy")),
                    "selectivity": _four(best.get("selectivity")),
                    "seeds": len(document["seeds"]),
                    "chance": f"{base['chance']:.4f}",
                }
            )
            self.end_progress_line()
            self.stderr.write(
                f"{path}: layer {document['best_layer']} best on va; te accuracy "
                f"{best['te_accuracy']:.3f} (majority {base['majority']['te_accuracy']:.3f}, "
                f"length {base['length']['te_accuracy']:.3f}) -> {target} "
                f"({time.perf_counter() - started:.1f} s)"
            )
        with (out / "summary.csv").open("w", newline="", encoding="utf-8") as handle:
            writer = csv.DictWriter(handle, fieldnames=SUMMARY_COLUMNS)
            writer.writeheader()
            writer.writerows(rows)

    def _read_tasks(
        self, raw: list[str], task_type: str | None
    ) -> list[tuple[Path, str, ProbingFile]]:
        """Every file read and checked before the model is loaded; all problems at once."""
        tasks: list[tuple[Path, str, ProbingFile]] = []
        problems: list[str] = []
        stems: dict[str, Path] = {}
        for item in raw:
            path = Path(item)
            if not path.is_file():
                problems.append(f"{item}: no such file")
                continue
            if path.stem in stems:
                problems.append(
                    f"{item}: same name as {stems[path.stem]}; results are written as "
                    f"{path.stem}.json, so rename one of them"
                )
                continue
            stems[path.stem] = path
            kind = task_type or guess_task_type(path.name)
            loaded = read_probing(path, task_type=kind)
            if not loaded.ok:
                shown = "\n  ".join(str(error) for error in loaded.errors[:20])
                more = len(loaded.errors) - 20
                problems.append(
                    f"{path} ({kind}): not a valid probing file:\n  {shown}"
                    + (f"\n  ... {more} more" if more > 0 else "")
                )
                continue
            tasks.append((path, kind, loaded))
        if problems:
            raise CommandError("\n".join(problems))
        return tasks

    def _progress(self, path: Path) -> Callable[[str, int, int], None]:
        def report(stage: str, done: int, total: int) -> None:
            unit = "sentences" if stage == "vectors" else "layers"
            self.progress_line(f"{path.name}: {stage} {done}/{total} {unit}   ")

        return report
