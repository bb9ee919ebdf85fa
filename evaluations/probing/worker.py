"""What a GPU worker does with one probing run. No database: the payload holds the
task's instances and the model's source, the result is `probe_task`'s document (the one
the `probe` command writes), so a stored run and the command agree number for number.

payload: {"model": {"source", "revision", "dtype"?}, "task": {"name", "type",
          "content_hash"}, "pooling", "probe", "seeds"?, "mdl"?, "memory_mb",
          "labels": [label, ...], "partition": ["tr" | "va" | "te", ...],
          "label": [index into labels, ...], "sentences": [sentence, ...],
          "form"?: [field #3 of each line, ...] or None,
          "frequency"?: {"corpus", "path", "content_hash"} or None}
(payloads from before seeds and MDL mean one seed, no MDL)
(instances in file order, as parallel lists: a 120,000-line task travels as three
lists, which the message's zlib compression shrinks well).

Progress counts sentences while vectors are extracted, then one step per layer probed:
done runs up to len(sentences) + layers.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluations.scoring.loading import LoadedModel, load_model
from evaluations.scoring.schema import ScoringError
from gym import artifact_cache, artifacts
from suites.corpora.reading import open_normalised
from suites.formats.probing import ProbingInstance

from . import controls, stored
from .run import probe_task


def payload_instances(payload: dict[str, Any]) -> list[ProbingInstance]:
    """The task's instances back from the payload's parallel lists."""
    labels = payload["labels"]
    sentences = payload["sentences"]
    partitions = payload["partition"]
    classes = payload["label"]
    forms = payload.get("form") or [None] * len(sentences)
    if not len(sentences) == len(partitions) == len(classes) == len(forms):
        raise ScoringError("the probing payload's lists differ in length")
    return [
        ProbingInstance(
            line=n,
            partition=part,
            label=labels[k],
            sentence=text,
            extra=(form,) if form else (),
        )
        for n, (part, k, text, form) in enumerate(
            zip(partitions, classes, sentences, forms, strict=True), 1
        )
    ]


def frequency_source(
    payload: dict[str, Any], instances: list[ProbingInstance]
) -> controls.UnigramSource | None:
    """The corpus the payload names, its forms counted (streamed, only the forms the task
    needs); None for the default (the CMU unigrams), and where the baseline will not use
    a source (a task type without it, or a file without the form column)."""
    spec = payload.get("frequency")
    task_type = (payload.get("task") or {}).get("type", "custom")
    forms = controls.target_forms(instances)
    row = controls.APPLICABLE.get(task_type, controls.APPLICABLE["custom"])
    if not spec or forms is None or not row["frequency"]:
        return None
    try:
        return controls.corpus_unigrams(
            open_normalised(_frequency_file(spec)), forms, name=spec["corpus"]
        )
    except (OSError, UnicodeDecodeError, ValueError, artifact_cache.CorruptArtifact) as exc:
        raise ScoringError(
            f"the frequency corpus {spec['corpus']!r} could not be read ({exc})"
        ) from None


def _frequency_file(spec: dict[str, Any]) -> Path:
    """The frequency corpus's text in this worker's artifact cache (a payload queued before
    the store named this host's path instead)."""
    if spec.get("key"):
        return artifact_cache.fetch_file(str(spec["key"]), sha256=spec.get("content_hash"))
    return Path(spec["path"])


def probing_model(spec: dict[str, Any]) -> LoadedModel:
    """The model, or a ScoringError that says why it cannot be probed."""
    lm = load_model(
        spec["source"], revision=spec.get("revision") or None, dtype=spec.get("dtype") or None
    )
    if not isinstance(lm, LoadedModel):
        raise ScoringError(
            "an n-gram model has no hidden states to probe; choose a causal or masked "
            "transformers model"
        )
    return lm


def expected_layers(lm: LoadedModel) -> int:
    """Layers counting the embedding output, from the config (0 when it does not say)."""
    blocks = getattr(lm.model.config, "num_hidden_layers", None)
    return blocks + 1 if isinstance(blocks, int) else 0


def run_probing(
    payload: dict[str, Any], progress: Callable[[int, int], None] | None = None
) -> dict[str, Any]:
    instances = payload_instances(payload)
    source = frequency_source(payload, instances)
    lm = probing_model(payload["model"])
    n = len(instances)
    layers = expected_layers(lm)

    def report(stage: str, done: int, total: int) -> None:
        nonlocal layers
        if progress is None:
            return
        if stage == "vectors":
            progress(done, n + layers)
        else:
            layers = total
            progress(n + done, n + total)

    def probe(**vectors: Any) -> dict[str, Any]:
        return probe_task(
            lm,
            instances,
            task=dict(payload["task"]),
            pooling=payload["pooling"],
            probe=payload["probe"],
            seeds=int(payload.get("seeds") or 1),
            mdl=bool(payload.get("mdl")),
            memory_limit_bytes=max(0, int(payload["memory_mb"])) * 1024**2,
            progress=report,
            frequency_source=source,
            **vectors,
        )

    # The vectors of a model the store holds still: fetched if some worker extracted
    # them, else extracted here and stored for the next run (any machine's).
    key = stored.vectors_key(payload)
    if key is None:
        return probe()
    if artifacts.exists(f"{key}/manifest.json"):
        with artifact_cache.using(key, folder=True) as folder:
            return probe(features=stored.load(folder))
    return probe(on_extracted=lambda features: stored.push(key, features))
