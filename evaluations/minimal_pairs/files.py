"""Minimal pairs on files, without a database: what the `minimal_pairs` and
`nlpscholar` commands do, written once.

`write_analysis` writes the files NLPScholar's analyze writes (by_cond to RESULTS.tsv,
by_pair to RESULTS_bypair.tsv, by_word to RESULTS_byword.tsv, each with pandas' index as
an unnamed first column). `run_nlpscholar_config` runs a MinimalPair config of
NLPScholar (`exp`, `mode`, `models`, `datafpath`, `predfpath`, `resultsfpath`, `save`,
`conditions`, `pred_measure`, `word_summary`, `punctuation`, `stride`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evaluations.minimal_pairs.analysis import (
    TABLES,
    Analysis,
    AnalysisError,
    AnalysisOptions,
    Table,
    analyze_minimal_pairs,
    table_to_tsv,
)
from evaluations.minimal_pairs.tokens import TokenTable, parse_predictions_tsv, predictions_to_tsv
from suites.formats.limits import UNLIMITED
from suites.formats.minimal_pairs import MinimalPairSet, load_minimal_pairs_file

Log = Callable[[str], None]

SUFFIXES = {"by_cond": "", "by_pair": "_bypair", "by_word": "_byword"}
# NLPScholar's model classes that Gym can run, and the engine's kind for each.
MODEL_KINDS = {
    "hf_causal_model": "causal",
    "auto_causal_model": "causal",
    "hf_masked_model": "masked",
}
CONFIG_KEYS = {
    "exp",
    "mode",
    "models",
    "datafpath",
    "predfpath",
    "resultsfpath",
    "save",
    "conditions",
    "pred_measure",
    "word_summary",
    "punctuation",
    "stride",
}


class ConfigError(ValueError):
    """The config or a file it names cannot be used."""


def results_path(results: Path, table: str) -> Path:
    """RESULTS.tsv for by_cond, RESULTS_bypair.tsv, RESULTS_byword.tsv (NLPScholar's
    names; a name without .tsv gets the suffix and .tsv appended)."""
    suffix = SUFFIXES[table]
    if results.suffix == ".tsv":
        return results.with_name(results.stem + suffix + ".tsv")
    return results.with_name(results.name + suffix + ".tsv") if suffix else results


def write_analysis(result: Analysis, results: Path) -> list[Path]:
    """The tables as NLPScholar names them; under another metric than NLPScholar's each
    ends with a `metric` column naming it, as the API's TSV tables do."""
    written: list[Path] = []
    metric = result.options.metric
    for name in TABLES:
        table = getattr(result, name)
        if table is None:
            continue
        if metric != "nlpscholar":
            table = Table(
                columns=[*table.columns, "metric"],
                rows=[[*row, metric] for row in table.rows],
                index=table.index,
            )
        target = results_path(results, name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(table_to_tsv(table), encoding="utf-8")
        written.append(target)
    return written


def parse_save(value: object, log: Log | None = None) -> list[str]:
    """`by_word, by_pair` -> the tables; unknown names are errors, or warnings with a log
    (NLPScholar ignores them)."""
    names = [part.strip() for part in _text(value).split(",") if part.strip()]
    tables = []
    for name in names:
        if name in TABLES:
            tables.append(name)
        elif log is not None:
            log(f"WARNING: {name} is not an output (by_word, by_pair, by_cond). Ignoring.")
        else:
            raise ConfigError(f"{name!r} is not an output; choose from by_word, by_pair, by_cond")
    return tables


def _text(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def load_pairs(path: Path, *, drop_incomplete_pairs: bool) -> MinimalPairSet:
    return load_minimal_pairs_file(
        str(path), drop_incomplete_pairs=drop_incomplete_pairs, limits=UNLIMITED
    )


def load_predictions(path: Path) -> TokenTable:
    return parse_predictions_tsv(path.read_bytes(), UNLIMITED)


def evaluate_file(
    *,
    source: str,
    pair_set: MinimalPairSet,
    model_name: str | None = None,
    kind: str | None = None,
    revision: str | None = None,
    dtype: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    word_probability: str = "tokens",
    metric: str = "nlpscholar",
) -> TokenTable:
    from evaluations.minimal_pairs.evaluate import evaluate_minimal_pairs
    from evaluations.scoring import load_model

    model = load_model(source, revision=revision, dtype=dtype, kind=kind)
    return evaluate_minimal_pairs(
        model,
        pair_set,
        model_name=model_name or source,
        progress=progress,
        word_probability=word_probability,
        metric=metric,
    )


def run_nlpscholar_config(config: Any, *, log: Log) -> list[Path]:
    """Run a MinimalPair config as NLPScholar would (paths relative to the current
    folder); returns the files written."""
    if not isinstance(config, dict):
        raise ConfigError("the config must be a YAML mapping (key: value lines)")
    if str(config.get("exp", "")).strip() != "MinimalPair":
        raise ConfigError(f"exp is {config.get('exp')!r}; this command runs exp: MinimalPair")
    for key in config:
        if key not in CONFIG_KEYS:
            log(f"WARNING: {key} is not used by Gym's MinimalPair. Ignoring.")
    modes = config.get("mode") or []
    modes = [modes] if isinstance(modes, str) else list(modes)
    unknown = [m for m in modes if m not in ("evaluate", "analyze")]
    if not modes or unknown:
        raise ConfigError("mode must list evaluate and/or analyze")
    if config.get("stride") is not None:
        log(
            "NOTE: stride is not needed: sentences longer than the model's context are "
            "scored with the engine's sliding window"
        )
    data_path = _path(config, "datafpath", required=True)
    pred_path = _path(config, "predfpath", required=True)
    pair_set = load_pairs(data_path, drop_incomplete_pairs=True)
    written: list[Path] = []
    if "evaluate" in modes:
        tables = []
        for source, kind in _models(config):
            log(f"Evaluating {source} ({kind}) on {data_path}")
            tables.append(evaluate_file(source=source, pair_set=pair_set, kind=kind))
        pred_path.parent.mkdir(parents=True, exist_ok=True)
        pred_path.write_text(predictions_to_tsv(TokenTable.concat(tables)), encoding="utf-8")
        written.append(pred_path)
    if "analyze" in modes:
        results = _path(config, "resultsfpath", required=True)
        save = parse_save(config.get("save"), log)
        conditions = []
        for name in _text(config.get("conditions")).split(","):
            name = name.strip()
            if name in pair_set.condition_columns:
                conditions.append(name)
            elif name:
                log(f"WARNING: {name} not in data file. Ignoring.")
        for warning in pair_set.warnings:
            log(f"WARNING: {warning}")
        options = AnalysisOptions(
            pred_measure=str(config.get("pred_measure", "surp")).strip(),
            word_summary=str(config.get("word_summary", "mean")).strip(),
            punctuation=str(config.get("punctuation", "previous")).strip(),
            conditions=tuple(conditions),
        )
        result = analyze(load_predictions(pred_path), pair_set, options, save)
        for warning in result.warnings[len(pair_set.warnings) :]:
            log(f"WARNING: {warning}")
        written += write_analysis(result, results)
    return written


def analyze(
    tokens: TokenTable, pair_set: MinimalPairSet, options: AnalysisOptions, save: Sequence[str]
) -> Analysis:
    if not save:
        raise AnalysisError("nothing to save: name by_word, by_pair and/or by_cond")
    return analyze_minimal_pairs(tokens, pair_set, options, tables=save)


def _path(config: dict[str, Any], key: str, *, required: bool) -> Path:
    value = config.get(key)
    if not value:
        raise ConfigError(f"the config needs {key}")
    return Path(str(value))


def _models(config: dict[str, Any]) -> list[tuple[str, str]]:
    models = config.get("models")
    if not isinstance(models, dict) or not models:
        raise ConfigError("models must map a model class (hf_causal_model, ...) to model names")
    out: list[tuple[str, str]] = []
    for cls, names in models.items():
        if cls not in MODEL_KINDS:
            raise ConfigError(
                f"model class {cls!r} is not supported; use one of {', '.join(MODEL_KINDS)}"
            )
        for name in [names] if isinstance(names, str) else list(names or []):
            out.append((str(name), MODEL_KINDS[cls]))
    return out
