"""lm-evaluation-harness task folders in and out (docs/minimal-pairs.md, "lm-eval").

Out: a pair set as a multiple-choice log-likelihood task in BLiMP's template shape (an
empty context, the two sentences as choices, the expected one the target) with its pairs
in a JSONL file named by `data_files`, which `lm_eval --include_path DIR` runs as it is.
The target delimiter chooses the convention: " " (the harness's BLiMP tasks: accuracy
equals Gym's metric `lm_eval`) or "" (the sentence itself after the start token: Gym's
metric `sentence`).

In: such a folder (a YAML file and the local JSONL it names) as a pair set; what the
task does not say in that shape (a context, a few-shot setting, other choices, a target
that is not one of the two, data that is not local JSONL) is refused with the reason.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from suites.formats import minimal_pairs as mp
from suites.formats.limits import DEFAULT_LIMITS, InputLimits

# Gym metric -> the harness's target delimiter that reproduces it.
DELIMITERS = {"lm_eval": " ", "sentence": ""}
CHOICES = "{{[sentence_good, sentence_bad]}}"
CONVENTIONS = {
    "lm_eval": "lm-evaluation-harness's BLiMP convention: the end-of-text token as context, "
    'target delimiter " " (the sentence with a leading space); equals Gym\'s metric lm_eval',
    "sentence": "the whole sentence after the start token, no leading space (target "
    'delimiter ""); equals Gym\'s metric sentence',
}


class LmEvalTaskInvalid(ValueError):
    """A task folder that is not a pair set; `where` names the file and key."""

    def __init__(self, message: str, *, where: str = "") -> None:
        super().__init__(message)
        self.where = where


def task_name(set_name: str) -> str:
    """A task name lm-eval accepts (letters, digits, _ and -) from the set's name."""
    slug = re.sub(r"[^A-Za-z0-9_-]+", "_", set_name).strip("_") or "pairs"
    return f"gym_{slug}"


def pair_records(data: mp.MinimalPairSet) -> list[dict[str, str]]:
    """One record per complete pair (its expected and its unexpected sentence), in the
    set's pair order, with the pair's id and its first sentence's conditions."""
    records = []
    for pairid, sentences in data.pairs().items():
        sides = {s.comparison: s for s in sentences}
        good, bad = sides.get(mp.EXPECTED), sides.get(mp.UNEXPECTED)
        if good is None or bad is None or len(sentences) != 2:
            continue
        conditions = {k: v for k, v in good.conditions.items() if k not in _RECORD_KEYS}
        records.append(
            {"sentence_good": good.sentence, "sentence_bad": bad.sentence, "pairID": pairid}
            | conditions
        )
    return records


_RECORD_KEYS = ("sentence_good", "sentence_bad", "pairID")


def task_yaml(name: str, data_file: str, *, metric: str, set_name: str, content_hash: str) -> str:
    """The task's YAML: BLiMP's template with local JSON data and the convention named."""
    config: dict[str, Any] = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": {"data_files": {"test": data_file}},
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "",
        "doc_to_target": 0,
        "doc_to_choice": CHOICES,
        "target_delimiter": DELIMITERS[metric],
        "num_fewshot": 0,
        "metric_list": [{"metric": "acc", "aggregation": "mean", "higher_is_better": True}],
        "metadata": {
            "version": 1.0,
            "gym_set": set_name,
            "gym_content_hash": content_hash,
            "gym_metric": metric,
            "convention": CONVENTIONS[metric],
        },
    }
    header = (
        f"# Exported by Gym from the minimal-pair set {set_name!r}.\n"
        f"# Convention: {CONVENTIONS[metric]}.\n"
        "# Ties: the harness counts a tie as correct (the first choice wins), Gym as a failure.\n"
    )
    return header + yaml.safe_dump(config, sort_keys=False, allow_unicode=True)


@dataclass
class TaskFolder:
    name: str
    files: dict[str, bytes]  # file name -> content


def export_task(
    data: mp.MinimalPairSet,
    *,
    set_name: str,
    content_hash: str,
    metric: str = "lm_eval",
    data_dir: str = "",
) -> TaskFolder:
    """The task folder's files. `data_dir`: where `data_files` says the JSONL is (the
    folder's absolute path for the command; "" for a path relative to where lm_eval runs).
    Raises LmEvalTaskInvalid for a metric the harness cannot reproduce or a set without
    pairs."""
    if metric not in DELIMITERS:
        raise LmEvalTaskInvalid(
            f"metric {metric!r} has no lm-eval convention; choose one of "
            f"{', '.join(DELIMITERS)} (NLPScholar's word analysis is not a harness metric)",
            where="metric",
        )
    records = pair_records(data)
    if not records:
        raise LmEvalTaskInvalid("the set has no complete pairs to export", where="set")
    name = task_name(set_name)
    data_name = f"{name}.jsonl"
    path = str(PurePosixPath(data_dir) / data_name) if data_dir else data_name
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records)
    yaml_text = task_yaml(name, path, metric=metric, set_name=set_name, content_hash=content_hash)
    return TaskFolder(
        name=name, files={f"{name}.yaml": yaml_text.encode(), data_name: lines.encode()}
    )


def write_task(folder: TaskFolder, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for file_name, content in folder.files.items():
        path = out / file_name
        path.write_bytes(content)
        written.append(path)
    return written


# --- in ------------------------------------------------------------------------------------

_CHOICE = re.compile(r"^\{\{\s*\[\s*(\w+)\s*,\s*(\w+)\s*\]\s*\}\}$")
_FIELD = re.compile(r"^\{\{\s*(\w+)\s*\}\}$")


@dataclass
class ImportedTask:
    name: str
    metric: str  # the Gym metric its delimiter reproduces
    pair_set: mp.MinimalPairSet


def _refuse(message: str, where: str) -> LmEvalTaskInvalid:
    return LmEvalTaskInvalid(f"{where}: {message}", where=where)


def read_task_yaml(text: str, where: str) -> dict[str, Any]:
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _refuse(f"not YAML ({str(exc)[:200]})", where) from None
    if not isinstance(config, dict):
        raise _refuse("the YAML is not a mapping of task settings", where)
    return config


def _check_shape(config: dict[str, Any], where: str) -> tuple[str, str, int, str]:
    """(good field, bad field... as choices, target index, delimiter) of a task in
    BLiMP's shape; LmEvalTaskInvalid naming the first setting that is not."""
    if "include" in config or "group" in config or "task" not in config:
        raise _refuse(
            "a task with its own `task` name and every setting in the file is needed "
            "(no `include` of another template, no `group`)",
            where,
        )
    if config.get("output_type") != "multiple_choice":
        raise _refuse("output_type must be multiple_choice (log-likelihood of choices)", where)
    if str(config.get("doc_to_text", "")) != "":
        raise _refuse(
            'doc_to_text must be "" (each choice scored on its own after the start token); '
            "a pair set has no shared context",
            f"{where} doc_to_text",
        )
    if int(config.get("num_fewshot") or 0) != 0:
        raise _refuse("num_fewshot must be 0", f"{where} num_fewshot")
    choices = _CHOICE.match(str(config.get("doc_to_choice", "")))
    if not choices:
        raise _refuse(
            "doc_to_choice must be two document fields, as {{[sentence_good, sentence_bad]}}",
            f"{where} doc_to_choice",
        )
    target = config.get("doc_to_target")
    if target not in (0, 1):
        raise _refuse("doc_to_target must be 0 or 1 (which choice is expected)", where)
    delimiter = str(config.get("target_delimiter", " "))
    if delimiter not in (" ", ""):
        raise _refuse('target_delimiter must be " " or ""', f"{where} target_delimiter")
    if config.get("process_docs") or config.get("filter_list"):
        raise _refuse("process_docs and filter_list cannot be represented", where)
    return choices.group(1), choices.group(2), int(target), delimiter


def _data_file(config: dict[str, Any], folder: Path, where: str) -> Path:
    if config.get("dataset_path") != "json":
        raise _refuse(
            "dataset_path must be json with local data_files (a hub dataset cannot be "
            "fetched here)",
            f"{where} dataset_path",
        )
    files = (config.get("dataset_kwargs") or {}).get("data_files")
    split = config.get("test_split") or config.get("validation_split")
    if isinstance(files, str):
        named = files
    elif isinstance(files, dict) and split in files and isinstance(files[split], str):
        named = files[split]
    else:
        raise _refuse(
            "dataset_kwargs.data_files must name one JSONL file for the task's split",
            f"{where} dataset_kwargs",
        )
    path = Path(named)
    if not path.is_absolute():
        path = folder / path.name if not (folder / path).is_file() else folder / path
    resolved = path.resolve()
    if not resolved.is_relative_to(folder.resolve()) or not resolved.is_file():
        raise _refuse(
            f"data file {named!r} is not a file inside the task folder", f"{where} data_files"
        )
    return resolved


def import_task(folder: Path, *, limits: InputLimits = DEFAULT_LIMITS) -> ImportedTask:
    """The task folder's one YAML file and its data as a pair set (lm-eval-task format,
    metric lm_eval for delimiter " ", sentence for ""). Raises LmEvalTaskInvalid (where:
    the file and setting) or MinimalPairFormatError (the data's rows)."""
    yamls = sorted(p for p in folder.glob("*.y*ml") if p.is_file())
    if len(yamls) != 1:
        raise LmEvalTaskInvalid(
            f"the folder must hold one task YAML file; it holds {len(yamls)}", where=str(folder)
        )
    where = yamls[0].name
    config = read_task_yaml(yamls[0].read_text(encoding="utf-8"), where)
    first, second, target, delimiter = _check_shape(config, where)
    data_path = _data_file(config, folder, where)
    good, bad = (first, second) if target == 0 else (second, first)
    lines = _renamed_records(data_path.read_bytes(), good, bad, data_path.name)
    parsed = mp.parse_blimp_jsonl(lines, limits=limits)
    parsed.source_format = mp.LM_EVAL_TASK
    metric = "lm_eval" if delimiter == " " else "sentence"
    return ImportedTask(name=str(config["task"]), metric=metric, pair_set=parsed)


def _renamed_records(data: bytes, good: str, bad: str, where: str) -> str:
    """The JSONL with the expected and unexpected fields named as BLiMP's; a line
    without them is refused here with its number."""
    out = []
    for number, line in enumerate(mp.decode_text(data).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise _refuse(f"line {number} is not JSON ({exc.msg})", where) from None
        if not isinstance(record, dict) or good not in record or bad not in record:
            raise _refuse(f"line {number} lacks the choice fields {good} and {bad}", where)
        renamed = {k: v for k, v in record.items() if k not in (good, bad, *_RECORD_KEYS)}
        renamed["sentence_good"], renamed["sentence_bad"] = record[good], record[bad]
        if "pairID" in record:
            renamed["pairID"] = record["pairID"]
        out.append(json.dumps(renamed, ensure_ascii=False))
    return "\n".join(out) + "\n"
