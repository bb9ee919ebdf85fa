"""Out-of-core n-gram training (issue 48): peak memory and wall time of the 3-gram in
memory and out of core, and of the 5-gram out of core, on a generated corpus (the Zipf
words of benchmarks/training.py, seeded), each in a fresh process so its peak is its own.

Peak memory is shown two ways: max RSS (ru_maxrss), which counts the pages of the
scratch files the run has mapped and touched (page cache the kernel may drop at any
time), and the peak of RssAnon (sampled every 20 ms from /proc/self/status), the memory
the process itself holds. The out-of-core runs share one ARPA check: the 3-gram out of
core must be byte for byte the 3-gram in memory.

    .venv/bin/python benchmarks/ngram_out_of_core.py [--words 5000000] [--memory-mb 256]
        [--only-5gram | --runs 5,3ooc,3mem] [--corpus FILE] [--dir SCRATCH] [--disk-mb N]
        [--json OUT] [--smoke]

`--corpus` reuses a corpus file (one generated before: its words are counted by the
trainer), `--dir` puts the corpus, the outputs and the trainer's scratch folder there
instead of the system's temporary folder, `--disk-mb` bounds the scratch folder.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import multiprocessing
import resource
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.training import generate_corpus  # noqa: E402


def _rss_anon_kb() -> int:
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("RssAnon:"):
                return int(line.split()[1])
    return 0


def _child(
    corpus: str,
    order: int,
    out: str,
    out_of_core: bool,
    memory_mb: int,
    disk_mb: int | None,
    queue: Any,
) -> None:
    from evaluations.training import ngram
    from suites.corpora.reading import open_normalised

    peak_anon = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            peak_anon[0] = max(peak_anon[0], _rss_anon_kb())
            time.sleep(0.02)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    started = time.perf_counter()
    summary = ngram.train_ngram(
        open_normalised(Path(corpus)),
        Path(out),
        order=order,
        out_of_core=out_of_core,
        memory_mb=memory_mb,
        disk_mb=disk_mb,
    )
    seconds = time.perf_counter() - started
    done.set()
    sampler.join()
    arpa = Path(out) / ngram.ARPA_NAME
    queue.put(
        {
            "order": order,
            "path": summary.counting,
            "memory_mb": summary.memory_mb,
            "words": summary.words,
            "seconds": round(seconds, 1),
            "max_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
            "peak_anon_mb": round(max(peak_anon[0], _rss_anon_kb()) / 1024),
            "runs": summary.runs,
            "temp_disk_peak_mb": round(summary.temp_disk_peak_bytes / 2**20, 1),
            "ngrams": summary.ngrams,
            "arpa_sha256": hashlib.sha256(arpa.read_bytes()).hexdigest()[:16],
        }
    )


def run(
    corpus: Path,
    order: int,
    out: Path,
    out_of_core: bool,
    memory_mb: int,
    disk_mb: int | None = None,
) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    child = context.Process(
        target=_child,
        args=(str(corpus), order, str(out), out_of_core, memory_mb, disk_mb, queue),
    )
    child.start()
    result = queue.get()
    child.join()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--words", type=int, default=5_000_000)
    parser.add_argument("--memory-mb", type=int, default=256, help="out-of-core budget")
    parser.add_argument(
        "--only-5gram", action="store_true", help="only the 5-gram out of core (large corpora)"
    )
    parser.add_argument(
        "--runs",
        default="3mem,3ooc,5ooc",
        help="which runs, in order: <order>mem (in memory) or <order>ooc (out of core)",
    )
    parser.add_argument("--corpus", help="a corpus file to use instead of generating one")
    parser.add_argument("--dir", help="where the corpus, outputs and scratch go")
    parser.add_argument("--disk-mb", type=int, help="bound on the scratch folder (MB)")
    parser.add_argument("--json", help="write the figures here too")
    parser.add_argument("--smoke", action="store_true", help="a small workload for CI")
    args = parser.parse_args()
    words, memory = (100_000, 1) if args.smoke else (args.words, args.memory_mb)
    plan = [(int(r[:-3]), r.endswith("ooc")) for r in args.runs.split(",")]
    if args.only_5gram:
        plan = [(5, True)]
    with tempfile.TemporaryDirectory(prefix="gym-ngram-ooc-", dir=args.dir) as folder:
        root = Path(folder)
        if args.corpus:
            corpus = Path(args.corpus)
            print(f"corpus: {corpus}; out-of-core budget {memory} MB")
        else:
            corpus = root / "corpus.txt"
            lines = generate_corpus(corpus, words)
            print(
                f"corpus: {words:,} generated words, {lines:,} lines; out-of-core budget "
                f"{memory} MB"
            )
        results = []
        for order, out_of_core in plan:
            budget = memory if out_of_core else 1 << 20
            result = run(
                corpus, order, root / f"{order}-{out_of_core}", out_of_core, budget, args.disk_mb
            )
            results.append(result)
            print(
                f"{order}-gram {result['path']:>11}: {result['seconds']:8.1f} s, max RSS "
                f"{result['max_rss_mb']:,} MB, peak RssAnon {result['peak_anon_mb']:,} MB, "
                f"{result['runs']:,} runs, temp disk at peak {result['temp_disk_peak_mb']:,} MB, "
                f"n-grams {result['ngrams']}, {result['words']:,} words",
                flush=True,
            )
        if (3, False) in plan and (3, True) in plan:
            shas = {(r["order"], r["path"]): r["arpa_sha256"] for r in results}
            same = shas[(3, "in memory")] == shas[(3, "out of core")]
            print(f"3-gram ARPA in memory == out of core: {same}")
            if not same:
                raise SystemExit("the out-of-core 3-gram differs from the in-memory one")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
