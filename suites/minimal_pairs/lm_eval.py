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

import io
import json
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from suites.formats import lm_eval_tasks as tasks
from suites.formats import minimal_pairs as mp
from suites.formats.limits import DEFAULT_LIMITS, InputLimits
from suites.formats.lm_eval_tasks import (
    DELIMITERS,
    LmEvalTaskInvalid,
    TaskFolder,
    task_name,
    write_task,
)

__all__ = ["DELIMITERS", "LmEvalTaskInvalid", "TaskFolder", "task_name", "write_task"]

# The upload format's name (file_format; a zip is detected without it).
UPLOAD_FORMAT = "lm-eval"

CHOICES = "{{[sentence_good, sentence_bad]}}"
CONVENTIONS = {
    "lm_eval": "lm-evaluation-harness's BLiMP convention: the end-of-text token as context, "
    'target delimiter " " (the sentence with a leading space); equals Gym\'s metric lm_eval',
    "sentence": "the whole sentence after the start token, no leading space (target "
    'delimiter ""); equals Gym\'s metric sentence',
}


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
    return tasks.multiple_choice_yaml(
        name,
        data_file,
        choices=CHOICES,
        metric=metric,
        header=[
            f"Exported by Gym from the minimal-pair set {set_name!r}.",
            f"Convention: {CONVENTIONS[metric]}.",
        ],
        metadata={
            "gym_set": set_name,
            "gym_content_hash": content_hash,
            "convention": CONVENTIONS[metric],
        },
    )


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
    tasks.metric_checked(metric)
    records = pair_records(data)
    if not records:
        raise LmEvalTaskInvalid("the set has no complete pairs to export", where="set")
    name = task_name(set_name)
    data_name = f"{name}.jsonl"
    path = tasks.data_path(data_dir, data_name)
    yaml_text = task_yaml(name, path, metric=metric, set_name=set_name, content_hash=content_hash)
    return TaskFolder(
        name=name, files={f"{name}.yaml": yaml_text.encode(), data_name: tasks.jsonl(records)}
    )


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


def _shown(value: Any) -> str:
    """A setting's value as a refusal quotes it (YAML's spelling, cut short)."""
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# The harness's metrics Gym's accuracy is: the share of pairs whose expected sentence
# has the higher log-likelihood, averaged over the pairs.
SAME_AS_ACC = frozenset({"acc"})
# Why the others cannot be represented (the rest: not an accuracy over two choices).
NOT_ACC = {
    "acc_norm": "it compares log-likelihoods divided by each choice's length in bytes",
    "acc_bytes": "it compares log-likelihoods divided by each choice's length in bytes",
    "acc_mutual_info": "it subtracts each choice's log-likelihood without its context",
}


def _check_metrics(config: dict[str, Any], where: str) -> None:
    """The task's `metric_list` asks for the harness's `acc` alone (mean over the
    pairs, higher better): what a pair set's accuracy is. A task without one is taken:
    the harness then reports acc beside acc_norm, and the pair set is its acc."""
    place = f"{where} metric_list"
    how = "give metric_list: [{metric: acc, aggregation: mean, higher_is_better: true}]"
    if "metric_list" not in config:
        return
    metrics = config["metric_list"]
    if not isinstance(metrics, list) or not metrics:
        raise _refuse(f"metric_list must be a list of metrics, not {_shown(metrics)}: {how}", place)
    for index, entry in enumerate(metrics):
        at = f"{place}.{index}"
        if not isinstance(entry, dict) or not isinstance(entry.get("metric"), str):
            raise _refuse(f"each metric is a mapping with a metric name: {how}", at)
        name = entry["metric"]
        if name not in SAME_AS_ACC:
            why = NOT_ACC.get(name, "it is not the accuracy over the two choices")
            raise _refuse(
                f"metric {_shown(name)} cannot be represented: {why}; a pair set's accuracy "
                f"is acc (the expected sentence more likely), so {how}",
                at,
            )
        if entry.get("aggregation", "mean") != "mean":
            raise _refuse(
                f"aggregation must be mean (the share of pairs), not {_shown(entry['aggregation'])}",
                f"{at}.aggregation",
            )
        if entry.get("higher_is_better", True) is not True:
            raise _refuse("higher_is_better must be true for acc", f"{at}.higher_is_better")


def _check_shape(config: dict[str, Any], where: str) -> tuple[str, str, int, str]:
    """(good field, bad field... as choices, target index, delimiter) of a task in
    BLiMP's shape; LmEvalTaskInvalid naming the first setting that is not. Every setting
    read here is checked for its type first, so that no value makes a plain error."""
    if "group" in config or "task" not in config:
        raise _refuse(
            "a task with its own `task` name is needed (set in the file or a template it "
            "includes; no `group` of several tasks)",
            where,
        )
    name = config["task"]
    if not isinstance(name, str) or not name.strip():
        raise _refuse(f"task must be the task's name as text, not {_shown(name)}", f"{where} task")
    if config.get("output_type") != "multiple_choice":
        raise _refuse("output_type must be multiple_choice (log-likelihood of choices)", where)
    if config.get("doc_to_text", "") != "":
        raise _refuse(
            'doc_to_text must be "" (each choice scored on its own after the start token); '
            "a pair set has no shared context",
            f"{where} doc_to_text",
        )
    if config.get("description") not in (None, ""):
        raise _refuse(
            "description must be empty: the harness puts it before every choice, and a pair "
            "set has no shared context",
            f"{where} description",
        )
    fewshot = config.get("num_fewshot")
    if fewshot is not None and (not _is_int(fewshot) or fewshot != 0):
        raise _refuse(
            f"num_fewshot must be 0 (or left out), not {_shown(fewshot)}: a pair set has no "
            "examples to show",
            f"{where} num_fewshot",
        )
    raw_choices = config.get("doc_to_choice", "")
    choices = _CHOICE.match(raw_choices) if isinstance(raw_choices, str) else None
    if not choices:
        raise _refuse(
            "doc_to_choice must be two document fields, as {{[sentence_good, sentence_bad]}}",
            f"{where} doc_to_choice",
        )
    target = config.get("doc_to_target")
    if not _is_int(target) or target not in (0, 1):
        raise _refuse(
            f"doc_to_target must be 0 or 1 (which choice is expected), not {_shown(target)}",
            f"{where} doc_to_target",
        )
    delimiter = config.get("target_delimiter", " ")
    if delimiter not in (" ", "") or not isinstance(delimiter, str):
        raise _refuse(
            f'target_delimiter must be " " or "", not {_shown(delimiter)}',
            f"{where} target_delimiter",
        )
    if config.get("process_docs") or config.get("filter_list"):
        raise _refuse("process_docs and filter_list cannot be represented", where)
    _check_metrics(config, where)
    return choices.group(1), choices.group(2), int(target), delimiter


def _data_name(config: dict[str, Any], where: str) -> str:
    if config.get("dataset_path") != "json":
        raise _refuse(
            "dataset_path must be json with local data_files (a hub dataset cannot be "
            "fetched here)",
            f"{where} dataset_path",
        )
    kwargs = config.get("dataset_kwargs") or {}
    if not isinstance(kwargs, dict):
        raise _refuse(
            f"dataset_kwargs must be a mapping with data_files, not {_shown(kwargs)}",
            f"{where} dataset_kwargs",
        )
    for key in ("test_split", "validation_split"):
        if config.get(key) is not None and not isinstance(config[key], str):
            raise _refuse(
                f"{key} must be a split's name (test), not {_shown(config[key])}",
                f"{where} {key}",
            )
    files = kwargs.get("data_files")
    split = config.get("test_split") or config.get("validation_split")
    if isinstance(files, str):
        return files
    if isinstance(files, dict) and split in files and isinstance(files[split], str):
        return str(files[split])
    raise _refuse(
        "dataset_kwargs.data_files must name one JSONL file for the task's split",
        f"{where} dataset_kwargs",
    )


# How deep `include`s may nest (a task file, its template, the template's template, ...).
MAX_INCLUDES = 4


def _include_path(including: str, named: Any) -> str:
    """The folder's file that `include: named` in the file `including` means: a relative
    path from that file's folder, never outside the task folder."""
    where = f"{PurePosixPath(including).name} include"
    if not isinstance(named, str) or not named.strip():
        raise _refuse(f"include must name a template file, not {_shown(named)}", where)
    path = PurePosixPath(named.strip().replace("\\", "/"))
    if path.is_absolute() or ".." in path.parts:
        raise _refuse(
            f"include {named[:200]!r} must be a file of the task folder, named relative to "
            "the including file (no absolute path, no '..')",
            where,
        )
    return str(PurePosixPath(including).parent / path).removeprefix("./")


def _with_includes(
    name: str, config: dict[str, Any], files: dict[str, bytes], chain: tuple[str, ...]
) -> dict[str, Any]:
    """`config` with what its `include` (and theirs) sets beneath its own settings, as
    lm-eval reads it: the including file's keys win."""
    if "include" not in config:
        return config
    where = f"{PurePosixPath(name).name} include"
    target = _include_path(name, config["include"])
    if target in chain or target == name:
        raise _refuse(f"include {target!r} includes itself, through {' -> '.join(chain)}", where)
    if len(chain) >= MAX_INCLUDES:
        raise _refuse(f"includes nest at most {MAX_INCLUDES} deep", where)
    if target not in files:
        raise _refuse(
            f"include {target[:200]!r} is not a file inside the task folder (links are "
            "not followed): put the template beside the task file",
            where,
        )
    base = read_task_yaml(mp.decode_text(files[target]), PurePosixPath(target).name)
    merged = dict(_with_includes(target, base, files, (*chain, name)))
    merged.update({k: v for k, v in config.items() if k != "include"})
    return merged


def _data_file(named: str, files: dict[str, bytes], where: str) -> tuple[str, bytes]:
    """The data file among the folder's files: by its relative path, else (a path
    written for another machine, as an export's absolute one) by its name alone."""
    path = PurePosixPath(named.replace("\\", "/"))
    if ".." not in path.parts:
        if str(path) in files:
            return str(path), files[str(path)]
        by_name = [k for k in files if PurePosixPath(k).name == path.name]
        if len(by_name) == 1:
            return by_name[0], files[by_name[0]]
    raise _refuse(
        f"data file {named[:200]!r} is not a file inside the task folder", f"{where} data_files"
    )


# What a task folder may hold: its YAML and its data, a few other files at most.
MAX_FILES = 20


def folder_files(folder: Path, limits: InputLimits = DEFAULT_LIMITS) -> dict[str, bytes]:
    """The folder's files (relative POSIX path -> content), links left out."""
    found = [p for p in sorted(folder.rglob("*")) if p.is_file() and not p.is_symlink()]
    if len(found) > MAX_FILES:
        raise LmEvalTaskInvalid(f"a task folder holds at most {MAX_FILES} files", where="folder")
    if sum(p.stat().st_size for p in found) > limits.unpacked_bytes:
        raise LmEvalTaskInvalid("the task folder is over the upload size limit", where="folder")
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in found}


def zip_files(data: bytes, limits: InputLimits = DEFAULT_LIMITS) -> dict[str, bytes]:
    """A zipped task folder's files (path in the zip -> content), held to the limits
    by the zip's own directory before anything is unpacked, and while unpacking."""
    try:
        archive = zipfile.ZipFile(io.BytesIO(data))
        members = [m for m in archive.infolist() if not m.is_dir()]
    except (zipfile.BadZipFile, ValueError) as exc:
        raise LmEvalTaskInvalid(f"not a readable zip ({str(exc)[:200]})", where="zip") from None
    if len(members) > MAX_FILES:
        raise LmEvalTaskInvalid(f"a task zip holds at most {MAX_FILES} files", where="zip")
    if sum(m.file_size for m in members) > limits.unpacked_bytes:
        raise LmEvalTaskInvalid("the zip unpacks to more than the upload limit", where="zip")
    files = {}
    for member in members:
        try:
            with archive.open(member) as handle:
                content = handle.read(member.file_size + 1)
        except (zipfile.BadZipFile, ValueError, NotImplementedError, OSError) as exc:
            where = f"zip {member.filename[:100]}"
            raise LmEvalTaskInvalid(
                f"{where}: unreadable ({str(exc)[:200]})", where=where
            ) from None
        if len(content) > member.file_size:
            raise LmEvalTaskInvalid("a zip member is larger than it says", where="zip")
        files[member.filename] = content
    return files


def task_from_files(
    files: dict[str, bytes], *, limits: InputLimits = DEFAULT_LIMITS
) -> ImportedTask:
    """A task folder's files (its one YAML and the local JSONL it names) as a pair set
    (lm-eval-task format, metric lm_eval for delimiter " ", sentence for ""). Raises
    LmEvalTaskInvalid (where: the file and setting) or MinimalPairFormatError (rows)."""
    configs = {
        k: read_task_yaml(mp.decode_text(files[k]), PurePosixPath(k).name)
        for k in sorted(files)
        if PurePosixPath(k).suffix in (".yaml", ".yml")
    }
    included = {_include_path(k, c["include"]) for k, c in configs.items() if "include" in c}
    yamls = [k for k in configs if k not in included]
    if len(yamls) != 1:
        raise LmEvalTaskInvalid(
            f"a task folder holds one task YAML file (and the templates it includes); "
            f"this one holds {len(yamls)}",
            where="folder",
        )
    where = PurePosixPath(yamls[0]).name
    config = _with_includes(yamls[0], configs[yamls[0]], files, ())
    first, second, target, delimiter = _check_shape(config, where)
    data_name, data = _data_file(_data_name(config, where), files, where)
    good, bad = (first, second) if target == 0 else (second, first)
    lines = _renamed_records(data, good, bad, PurePosixPath(data_name).name)
    parsed = mp.parse_blimp_jsonl(lines, limits=limits)
    parsed.source_format = mp.LM_EVAL_TASK
    parsed.metric = "lm_eval" if delimiter == " " else "sentence"
    return ImportedTask(name=config["task"].strip(), metric=parsed.metric, pair_set=parsed)


def import_task(folder: Path, *, limits: InputLimits = DEFAULT_LIMITS) -> ImportedTask:
    """A task folder on disk as a pair set (`task_from_files`)."""
    return task_from_files(folder_files(folder, limits), limits=limits)


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
