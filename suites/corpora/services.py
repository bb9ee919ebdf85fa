"""Writes and reads of corpora: importing a file is one function, called by the upload
page, the API and `manage.py import_corpus`."""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

from django.conf import settings
from django.contrib.auth.models import User
from django.db.models import QuerySet

from gym import artifacts
from suites.catalog import COMMON_SORTS, catalog_filter
from suites.catalog_services import (
    DataInvalid,
    name_and_tag_errors,
    named_row_write,
    tags_set,
    upload_name,
)
from suites.corpora import reading
from suites.corpora.models import Corpus
from suites.formats.report import SuiteError

# Names that the corpus pages' URLs use for themselves.
RESERVED_NAMES = {"upload"}
CORPUS_SORTS: dict[str, tuple[str, ...]] = {**COMMON_SORTS, "words": ("-word_count",)}


class CorpusInvalid(DataInvalid):
    """The corpus cannot be saved; `errors` says where and why. Nothing was kept."""

    errors: list[SuiteError]


def _opened(source: Path | Any) -> tuple[IO[bytes], bool]:
    """A binary handle on `source` (a path or an uploaded file) and whether to close it."""
    if isinstance(source, (str, Path)):
        return Path(source).open("rb"), True
    if hasattr(source, "open") and hasattr(source, "chunks"):  # a Django UploadedFile
        source.open("rb")
        source.seek(0)
        return source, False
    return source, False


def corpus_import(
    *,
    source: Path | Any,
    name: str,
    owner: User | None,
    description: str = "",
    tags: Iterable[str] = (),
    file_name: str = "",
    validation_fraction: float = reading.DEFAULT_VALIDATION_FRACTION,
    validation_max: int = reading.DEFAULT_VALIDATION_MAX,
    validation_seed: int = reading.DEFAULT_VALIDATION_SEED,
    rename_if_taken: bool = False,
) -> Corpus:
    """Read, check and store a corpus file.

    The file streams through the reader into a temporary file beside the corpora, which
    becomes `<content hash>.txt` only when the whole file is valid; the row is written in
    one transaction. `rename_if_taken`: a taken name becomes the first free
    '<name> (2)', …. Raises CorpusInvalid (naming the line) and keeps nothing.
    """
    name = upload_name(Corpus, name.strip(), rename_if_taken=rename_if_taken)
    tags = list(tags)
    split = {
        "validation_fraction": validation_fraction,
        "validation_max": validation_max,
        "validation_seed": validation_seed,
    }
    errors = name_and_tag_errors(
        name=name,
        model=Corpus,
        noun="corpus",
        reserved=RESERVED_NAMES,
        tags=tags,
        description=description,
    )
    errors.extend(_split_errors(validation_fraction, validation_max, validation_seed))
    if errors:
        raise CorpusInvalid(errors)
    original = file_name or (Path(source).name if isinstance(source, (str, Path)) else "")
    original = original or str(getattr(source, "name", "") or "")
    with _corpus_file(source, original, split) as (summary, final):
        with named_row_write(
            name=name, model=Corpus, noun="corpus", reserved=RESERVED_NAMES, invalid=CorpusInvalid
        ):
            corpus = Corpus.objects.create(
                name=name,
                owner=owner,
                description=description,
                original_name=original[:255],
                file_name=final.name,
                **_summary_fields(summary),
                **split,
            )
            tags_set(target=corpus, raw=tags)
    return corpus


def _split_errors(fraction: float, most: int, seed: int) -> list[SuiteError]:
    """What is wrong with the options of the validation split."""
    errors = []
    if not 0.0 <= fraction < 1.0:
        errors.append(
            SuiteError("validation_fraction", "give a fraction from 0 up to (not including) 1")
        )
    if not 0 <= most <= 10_000_000:
        errors.append(SuiteError("validation_max", "give a number of lines from 0 to 10,000,000"))
    if not 0 <= seed < 2**62:
        errors.append(SuiteError("validation_seed", "give a seed from 0 to 2**62 - 1"))
    return errors


@contextlib.contextmanager
def _corpus_file(
    source: Path | Any, original: str, split: dict[str, Any]
) -> Iterator[tuple[reading.CorpusSummary, Path]]:
    """The file read and checked into `<content hash>.txt` among the corpora and put in
    the artifact store: its summary and path, for the row to be written in the block. A
    file this made is removed again when the block fails (unless a row names it); a
    CorpusError becomes CorpusInvalid."""
    folder = Path(settings.GYM_CORPUS_DIR)
    folder.mkdir(parents=True, exist_ok=True)
    handle, close = _opened(source)
    fd, temp_name = tempfile.mkstemp(prefix=".upload-", suffix=".txt", dir=folder)
    temp = Path(temp_name)
    kept: Path | None = None
    try:
        with os.fdopen(fd, "wb") as out:
            summary = reading.read_corpus(
                handle,
                out,
                name=original,
                limit=settings.GYM_MAX_CORPUS_BYTES,
                max_line=settings.GYM_MAX_CORPUS_LINE_BYTES,
                sample_chars=settings.GYM_SAMPLE_LINE_CHARS,
                **split,
            )
        final = folder / f"{summary.content_hash}.txt"
        if final.exists():
            temp.unlink()  # the same text is stored already (another corpus's)
        else:
            os.replace(temp, final)
            kept = final
        # In the artifact store before the row exists: a worker on another machine reads
        # it there. A store out of reach raises StoreUnavailable and keeps nothing.
        artifacts.put_content(final, "corpora", link=True)
        yield summary, final
        kept = None
    except reading.CorpusError as exc:
        raise CorpusInvalid([SuiteError(exc.where, exc.message)]) from None
    finally:
        if close:
            handle.close()
        temp.unlink(missing_ok=True)
        if kept is not None and not Corpus.objects.filter(file_name=kept.name).exists():
            kept.unlink(missing_ok=True)


def _summary_fields(summary: reading.CorpusSummary) -> dict[str, Any]:
    """A corpus row's fields that reading its file counted."""
    return {
        "content_hash": summary.content_hash,
        "source_format": summary.source_format,
        "gzipped": summary.gzipped,
        "bytes": summary.bytes,
        "line_count": summary.lines,
        "word_count": summary.words,
        "char_count": summary.characters,
        "blank_lines": summary.blank_lines,
        "length_counts": summary.length_histogram(),
        "sample": sample_lines(summary.sample),
        "validation_threshold": summary.validation_threshold,
        "validation_lines": summary.validation_lines,
    }


def sample_lines(sample: Iterable[Sequence[Any]]) -> list[list[Any]]:
    """A corpus's sample as [line number, text] pairs, each text cut to
    GYM_SAMPLE_LINE_CHARS characters with '…' after it when it was longer: what is stored,
    what the page shows and what the API answers (one 10 MB line would be 10 MB in each)."""
    limit = settings.GYM_SAMPLE_LINE_CHARS
    return [[number, reading.sample_text(text, limit)] for number, text in sample]


def corpus_list(*, q: str = "", tag: str = "", sort: str = "name") -> QuerySet[Corpus]:
    return catalog_filter(Corpus.objects.all(), q=q, tag=tag, sort=sort, sorts=CORPUS_SORTS)


def corpus_histogram(corpus: Corpus) -> dict[str, list[Any]]:
    """The length histogram in buckets a page can draw: single lengths up to 16 words,
    then doubling ranges (17-32, 33-64, ..., 256 and more)."""
    edges = [*range(0, 17), 32, 64, 128, 255, reading.LENGTH_CAP]
    labels: list[str] = []
    counts: list[int] = []
    lower = 0
    for upper in edges:
        total = sum(
            count for words, count in corpus.length_counts.items() if lower <= int(words) <= upper
        )
        if upper == reading.LENGTH_CAP:
            label = f"{reading.LENGTH_CAP}+"
        else:
            label = str(upper) if upper == lower else f"{lower}-{upper}"
        labels.append(label)
        counts.append(total)
        lower = upper + 1
    while labels and counts[-1] == 0:  # no empty buckets past the longest line
        labels.pop()
        counts.pop()
    if counts and counts[0] == 0:  # no line has 0 words
        labels, counts = labels[1:], counts[1:]
    return {"labels": labels, "counts": counts}


def corpus_validation_split(corpus: Corpus) -> reading.Split:
    return reading.Split(seed=corpus.validation_seed, threshold=corpus.validation_threshold)


def corpus_in_store(corpus: Corpus) -> str:
    """The corpus's key in the artifact store, put there first from this host's file when
    it is not there yet (a corpus imported before the store existed). A payload names this
    key, never a path: a worker on another machine fetches it into its own cache."""
    key = corpus.artifact_key
    if not artifacts.exists(key) and corpus.path.is_file():
        artifacts.put_content(corpus.path, "corpora", link=True)
    return key


def corpus_local_path(corpus: Corpus) -> Path:
    """A local path of the corpus's text: this host's file, or the artifact cache's copy
    (fetched from the store and checked by its hash) on a host that has none."""
    if corpus.path.is_file():
        return corpus.path
    from gym import artifact_cache

    return artifact_cache.fetch_file(corpus.artifact_key, sha256=corpus.content_hash)
