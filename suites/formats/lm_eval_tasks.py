"""What every lm-evaluation-harness task folder Gym writes shares (docs/minimal-pairs.md,
"lm-eval"): the conventions the harness can reproduce, a multiple-choice log-likelihood
task's YAML with its data in a local JSONL file, and writing or zipping the folder.

Pair sets (suites.minimal_pairs.lm_eval) and test suites (suites.syntaxgym.lm_eval)
each build their records and call this; neither imports the other.
"""

from __future__ import annotations

import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

# Gym metric -> the harness's target delimiter that reproduces it.
DELIMITERS = {"lm_eval": " ", "sentence": ""}
TIES = "Ties: the harness counts a tie as correct (the first choice wins), Gym as a failure."


class LmEvalTaskInvalid(ValueError):
    """A task Gym cannot write or read; `where` names the file, setting or part."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.where = where


def task_name(name: str) -> str:
    """A task name lm-eval accepts (letters, digits, _ and -) from a Gym name."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", name).strip("_") or "pairs"
    return f"gym_{slug}"


def metric_checked(metric: str) -> str:
    if metric not in DELIMITERS:
        raise LmEvalTaskInvalid(
            f"metric {metric!r} has no lm-eval convention; choose one of "
            f"{', '.join(DELIMITERS)} (NLPScholar's word analysis is not a harness metric)",
            where="metric",
        )
    return metric


def multiple_choice_yaml(
    name: str,
    data_file: str,
    *,
    choices: str,
    metric: str,
    header: list[str],
    metadata: dict[str, Any],
) -> str:
    """A task in BLiMP's template shape: no context, `choices` (a document field or a
    template) scored each on its own after the end-of-text token, the first one the
    target; local JSON data; `header` lines as comments above it."""
    config: dict[str, Any] = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": data_file}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "",
        "doc_to_target": 0,
        "doc_to_choice": choices,
        "target_delimiter": DELIMITERS[metric],
        "num_fewshot": 0,
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {"version": 1.0, **metadata, "gym_metric": metric},
    }
    comments = "".join(f"# {line}\n" for line in [*header, TIES])
    return comments + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


def jsonl(records: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()


def data_path(data_dir: str, data_name: str) -> str:
    """What `data_files` says: the file under `data_dir` (an absolute folder for the
    command; the zip's top folder for the API), or the bare name."""
    return str(PurePosixPath(data_dir) / data_name) if data_dir else data_name


@dataclass
class TaskFolder:
    name: str  # the task, or the first of `tasks`
    files: dict[str, bytes]  # file name -> content
    tasks: tuple[str, ...] = ()  # every task the folder holds (all of them: `name` alone)

    @property
    def task_list(self) -> str:
        """What `lm_eval --tasks` takes to run them all."""
        return ",".join(self.tasks or (self.name,))


def write_task(folder: TaskFolder, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, content in folder.files.items():
        path = out / file_name
        path.write_bytes(content)
        written.append(path)
    return written


def zipped(folder: TaskFolder, top: str) -> bytes:
    """The folder's files under `top/` in a zip."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for file_name, content in folder.files.items():
            archive.writestr(f"{top}/{file_name}", content)
    return buffer.getvalue()
