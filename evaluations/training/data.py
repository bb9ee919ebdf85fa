"""Where training text comes from: a corpus file as uploaded (TSV or plain text, either
gzipped, read through suites.corpora.reading) or a stored corpus (normalised text), and
its held-out validation lines. No Django."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from suites.corpora import reading


@dataclass(frozen=True)
class CorpusSource:
    """A corpus file and its split. `normalised`: a stored corpus (one sequence a line),
    else a file as uploaded."""

    path: Path
    split: reading.Split
    normalised: bool = False
    validation_lines: int = 0
    # A second corpus as the validation text: then every line of this one is trained on.
    validation_from: CorpusSource | None = None
    # A stored corpus's key in the artifact store and its SHA-256: what a payload names
    # (a worker fetches it into its own cache), never `path`, which is this host's.
    key: str = ""
    sha256: str = ""

    def sequences(self) -> Iterator[str]:
        if self.normalised:
            yield from reading.open_normalised(self.path)
            return
        with self.path.open("rb") as handle:
            for _number, line in reading.iter_corpus(handle, name=self.path.name):
                yield line

    def training(self) -> Iterator[str]:
        if self.validation_from is not None:
            return self.sequences()
        return self.split.lines(self.sequences(), validation=False)

    def validation(self) -> Iterator[str]:
        if self.validation_from is not None:
            return self.validation_from.sequences()
        return self.split.lines(self.sequences(), validation=True)

    def as_payload(self) -> dict[str, object]:
        where = {"key": self.key, "sha256": self.sha256} if self.key else {"path": str(self.path)}
        return {
            **where,
            "seed": self.split.seed,
            "threshold": self.split.threshold,
            "normalised": self.normalised,
            "validation_lines": self.validation_lines,
            "validation_from": None
            if self.validation_from is None
            else self.validation_from.as_payload(),
        }

    @classmethod
    def from_payload(
        cls, data: dict[str, Any], fetch: Callable[..., Path] | None = None
    ) -> CorpusSource:
        """The source a payload names. A stored corpus is named by key: `fetch(key,
        sha256=...)` gives its local path (gym.artifact_cache.fetch_file on a worker)."""
        key, sha256 = str(data.get("key") or ""), str(data.get("sha256") or "")
        if key:
            if fetch is None:
                raise ValueError(f"the corpus {key} is in the artifact store: give fetch")
            path = fetch(key, sha256=sha256 or None)
        else:
            path = Path(str(data["path"]))
        return cls(
            path=path,
            split=reading.Split(seed=int(data["seed"]), threshold=int(data["threshold"])),
            normalised=bool(data["normalised"]),
            validation_lines=int(data.get("validation_lines", 0)),
            validation_from=cls.from_payload(data["validation_from"], fetch)
            if data.get("validation_from")
            else None,
            key=key,
            sha256=sha256,
        )


def _sequence_count(path: Path, what: str) -> int:
    """The non-blank sequences of the corpus file `path`, read through once (a
    reading.CorpusError names the line of a problem, or says that `what` has none)."""
    count = 0
    with path.open("rb") as handle:
        for _item in reading.iter_corpus(handle, name=path.name):
            count += 1
    if count == 0:
        raise reading.CorpusError("file", f"no text: {what} has no non-blank sequence")
    return count


def corpus_file(
    path: Path,
    *,
    fraction: float = reading.DEFAULT_VALIDATION_FRACTION,
    maximum: int = reading.DEFAULT_VALIDATION_MAX,
    seed: int = reading.DEFAULT_VALIDATION_SEED,
) -> CorpusSource:
    """A corpus file as uploaded, checked in one pass (reading.CorpusError names the
    line of a problem) that also chooses its validation lines."""
    chooser = reading.ValidationChooser(fraction=fraction, maximum=maximum, seed=seed)
    chooser.add(_sequence_count(path, "the corpus"))
    threshold, held = chooser.finish()
    return CorpusSource(
        path=path, split=reading.Split(seed=seed, threshold=threshold), validation_lines=held
    )


def with_validation_file(source: CorpusSource, path: Path) -> CorpusSource:
    """`source` trained on whole, validated on every line of the corpus file `path`
    (checked in one pass, as `corpus_file`)."""
    count = _sequence_count(path, "the validation file")
    validation = CorpusSource(path=path, split=reading.Split(), validation_lines=count)
    return replace(source, validation_lines=count, validation_from=validation)
