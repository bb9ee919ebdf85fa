"""Which sentences of a benchmark occur in a corpus: the corpus check a learning curve
needs (a model that saw a suite's sentences while training tells nothing about what it
learnt). No Django, and plain sentences in: the caller gathers a benchmark's sentences.

Sentences and corpus lines are compared whole, after one normalisation of both sides
(`normalised_lines`): Unicode NFC of the case-folded text, every run of whitespace one
space, no space at either end, no space before . , ; : ! ?, and no . ! ? at the end. So
"The keys are here ." and "the keys are here" are the same sentence. A benchmark
sentence inside a longer corpus line (a line of several sentences) is not found.

The corpus is read once, in blocks of whole lines (`BLOCK_BYTES` and the rest of the
line it ends in), each normalised at once: the memory is a few blocks and the
benchmarks' sentences, whatever the corpus's size."""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

# Bumped whenever the normalisation changes, so that results cached under it are not read.
VERSION = 1
BLOCK_BYTES = 8 * 1024 * 1024
# Whitespace that is not a single space (a newline ends a line and stays).
_SPACES = re.compile(r"[^\S\n]{2,}|[^\S\n ]")
_ODD_SPACE = "\t\r\x0b\x0c\x1c\x1d\x1e\x1f"
PUNCTUATION = ".,;:!?"
_FINAL = ".!?"


def normalised_lines(block: str) -> list[str]:
    """The lines of `block` (split at "\\n" only), each normalised. The whole block
    passes through each step at once (a step of str's is a loop in C): a corpus of 2 GB
    holds tens of millions of lines."""
    text = unicodedata.normalize("NFC", block.casefold())
    # Most corpora hold single spaces only: the regular expression is the slow part.
    if not text.isascii() or "  " in text or any(c in text for c in _ODD_SPACE):
        text = _SPACES.sub(" ", text)
    for mark in PUNCTUATION:
        text = text.replace(f" {mark}", mark)
    return [line.strip(" ").rstrip(_FINAL) for line in text.split("\n")]


def normalised(sentence: str) -> str:
    """One sentence normalised as the corpus's lines are (a line break is a space)."""
    return normalised_lines(" ".join(sentence.splitlines()))[0]


def blocks(path: Path, size: int = BLOCK_BYTES) -> Iterable[str]:
    """The file's text in blocks of whole lines (a corpus file is UTF-8, one line a
    sequence): `size` bytes and the rest of the line they end in."""
    with path.open("rb") as handle:
        while chunk := handle.read(size):
            if not chunk.endswith(b"\n"):
                chunk += handle.readline()
            yield chunk.decode("utf-8", errors="replace")


def sentences_found(path: Path, sentences: set[str]) -> set[str]:
    """Those of `sentences` (normalised) that are a line of the corpus file at `path`,
    read once."""
    found: set[str] = set()
    if not sentences:
        return found
    for block in blocks(path):
        found |= sentences.intersection(normalised_lines(block))
        if len(found) == len(sentences):
            break
    return found
