"""Training throughput: n-gram words per second and peak memory, and causal and masked
tokens per second, with the code the `train` command and the training worker use.

- n-gram: a 3-gram and a 5-gram (interpolated modified Kneser-Ney, ARPA written) on a
  generated corpus (Zipf-distributed words over a 50,000-word vocabulary, sentences of
  5-25 words, seeded), each in a fresh process so that its peak memory (max RSS) is its
  own. With NLTK installed, `nltk.lm.KneserNeyInterpolated` on a sample it can finish
  (the first --nltk-words words of the same corpus, same order): fit only, no ARPA.
- causal and masked: optimizer steps per second and tokens per second for the presets
  asked (tiny and tiny-bert by default, a causal and a masked model of the same size;
  small = GPT-2 small, small-bert = BERT-base) on the device asked (CPU by default),
  after the tokenizer and the packed data are built (those are timed apart). A masked
  preset trains with BERT's objective (15% of the tokens predicted) and counts every
  token of its blocks, as a causal one does. On a GPU with
  --peak-tflops, the model FLOPs utilisation: (6 * parameters + 12 * layers * width *
  context) FLOPs per token, times tokens per second, over the peak; --measure-peak also
  times a bf16 matrix product, the ceiling the card reaches here.

    .venv/bin/python benchmarks/training.py [--words 10000000] [--presets tiny,tiny-bert]
        [--steps 20] [--device cpu|cuda] [--peak-tflops 989] [--json OUT] [--smoke]
        [--micro-batches 4,16] [--compile auto|on|off|off,on] [--measure-peak]
        [--devices 1,2 --batch-tokens 4096]
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

VOCABULARY = 50_000


def generate_corpus(path: Path, words: int, seed: int = 0) -> int:
    """Zipf-distributed words in sentences of 5-25 words; returns the lines written."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, VOCABULARY + 1)
    weights = 1.0 / ranks
    weights /= weights.sum()
    names = np.array([f"w{i}" for i in range(VOCABULARY)], dtype=object)
    lines = 0
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < words:
            block = min(1_000_000, words - written)
            ids = rng.choice(VOCABULARY, size=block, p=weights)
            lengths = rng.integers(5, 26, size=block // 5 + 1)
            start = 0
            for length in lengths:
                if start >= block:
                    break
                out.write(" ".join(names[ids[start : start + length]]) + " .\n")
                start += length
                lines += 1
            written += block
    return lines


def _peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _ngram_child(corpus: str, order: int, out: str, queue: Any) -> None:
    from evaluations.training import ngram
    from suites.corpora.reading import open_normalised

    started, cpu_started = time.perf_counter(), time.process_time()
    summary = ngram.train_ngram(open_normalised(Path(corpus)), Path(out), order=order)
    seconds = time.perf_counter() - started
    # CPU seconds too: on a shared machine the wall clock counts other processes' turns.
    cpu = time.process_time() - cpu_started
    queue.put(
        {
            "order": order,
            "words": summary.words,
            "seconds": round(seconds, 2),
            "cpu_seconds": round(cpu, 2),
            "words_per_second": round(summary.words / seconds),
            "words_per_cpu_second": round(summary.words / cpu),
            "peak_mb": round(_peak_mb()),
            "ngrams": summary.ngrams,
            "arpa_mb": round((Path(out) / ngram.ARPA_NAME).stat().st_size / 2**20, 1),
        }
    )


def _nltk_child(corpus: str, order: int, words: int, queue: Any) -> None:
    from nltk.lm import KneserNeyInterpolated
    from nltk.lm.preprocessing import padded_everygram_pipeline

    sentences: list[list[str]] = []
    count = 0
    with open(corpus, encoding="utf-8") as handle:
        for line in handle:
            tokens = line.split()[:-1]  # the " ." the generator ends each line with
            sentences.append(tokens)
            count += len(tokens) + 1
            if count >= words:
                break
    started = time.perf_counter()
    grams, vocab = padded_everygram_pipeline(order, sentences)
    model = KneserNeyInterpolated(order)
    model.fit(grams, vocab)
    seconds = time.perf_counter() - started
    queue.put(
        {
            "order": order,
            "words": count,
            "seconds": round(seconds, 2),
            "words_per_second": round(count / seconds),
            "peak_mb": round(_peak_mb()),
        }
    )


def _in_child(target: Any, *args: Any) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    result = queue.get()
    process.join()
    return result


def causal_throughput(
    corpus: Path,
    preset: str,
    steps: int,
    device: str,
    work: Path,
    peak_tflops: float,
    micro_batch: int = 0,
    compile_mode: str = "auto",
    devices: int = 1,
    batch_tokens: int = 0,
) -> dict[str, Any]:
    import torch

    from evaluations.training import causal
    from evaluations.training.data import corpus_file

    source = corpus_file(corpus)
    kind = "masked" if preset in causal.MASKED_PRESETS else "causal"
    shape = causal.presets_of(kind)[preset]
    options = causal.options_class(kind)(
        shape=shape,
        steps=steps,
        batch_tokens=batch_tokens,
        micro_batch=micro_batch or (8 if preset.startswith("tiny") else 4),
        checkpoints=1,
        device=device,
        compile=compile_mode,
        devices=devices,
    )
    # One folder per preset: its tokenizer and packed data (data/) are built by the first
    # variant and kept for the next; everything else goes after each variant.
    out = work / f"causal-{preset}"
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    times: list[float] = []
    started = time.perf_counter()
    summary = causal.train_causal(
        source.training,
        source.validation,
        out,
        options,
        on_step=lambda entry: times.append(time.perf_counter()),
    )
    total = time.perf_counter() - started
    # Steady state: from the end of the first step (compilation, caches) to the last.
    measured = times[-1] - times[0]
    tokens = (len(times) - 1) * options.tokens_per_step
    result = {
        "objective": kind,
        "preset": preset,
        "device": device,
        "devices": devices,
        "micro_batch": options.micro_batch,
        "compiled": options.compiles,
        "threads": torch.get_num_threads(),
        "parameters": summary.parameters,
        "tokens_per_step": options.tokens_per_step,
        "steps": steps,
        "steps_per_second": round((len(times) - 1) / measured, 2),
        "tokens_per_second": round(tokens / measured),
        "first_step_seconds": round(times[0] - started, 2),
        "setup_seconds": round(total - measured, 2),
        "final_loss": summary.final_loss,
    }
    if device.startswith("cuda"):
        result["peak_gpu_mb"] = round(torch.cuda.max_memory_allocated() / 2**20)
        result["gpu"] = torch.cuda.get_device_name()
        # Model FLOPs per token: 6 per parameter (forward and backward of every weight,
        # the output layer included) and the attention's 12 * layers * width * context
        # (its two matrix products, forward and backward), as PaLM's appendix B counts.
        per_token = 6 * summary.parameters + 12 * shape.layers * shape.width * shape.context
        result["model_tflops"] = round(per_token * tokens / measured / 1e12, 1)
        if peak_tflops:
            result["mfu"] = round(per_token * tokens / measured / (peak_tflops * 1e12), 4)
    for child in out.iterdir():
        if child.name != causal.DATA_DIR:
            if child.is_dir():
                shutil.rmtree(child)
            else:
                child.unlink()
    return result


def matmul_tflops(device: str) -> float:
    """The bf16 rate of an 8192^3 matrix product on this GPU (mean of ten after three
    warm-ups): the ceiling the card reaches on this machine, beside its datasheet peak."""
    import torch

    n = 8192
    a = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=device, dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(10):
        a @ b
    torch.cuda.synchronize()
    return round(2 * n**3 * 10 / (time.perf_counter() - start) / 1e12, 1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--words", type=int, default=10_000_000)
    parser.add_argument("--orders", default="3,5")
    parser.add_argument("--nltk-words", type=int, default=200_000)
    parser.add_argument(
        "--presets",
        default="tiny,tiny-bert",
        help="causal and masked presets, e.g. small,small-bert",
    )
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--peak-tflops", type=float, default=0.0)
    parser.add_argument(
        "--micro-batches", default="", help="sequences per forward pass, e.g. 4,16 (one run each)"
    )
    parser.add_argument(
        "--compile", default="auto", help="torch.compile: auto, on or off, or several: off,on"
    )
    parser.add_argument(
        "--variants",
        default="",
        help="micro-batch:compile pairs instead of every combination, e.g. 4:off,16:on",
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=0,
        help="tokens per optimizer step (0: one micro-batch); with --devices, a multiple of "
        "devices x micro-batch x context",
    )
    parser.add_argument(
        "--devices",
        default="1",
        help="processes of one training (torch DDP: GPUs, or gloo on the CPU), e.g. 1,2",
    )
    parser.add_argument(
        "--measure-peak", action="store_true", help="also time a bf16 matrix product (GPU)"
    )
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--smoke", action="store_true", help="a small workload for CI")
    args = parser.parse_args()
    if args.smoke:
        args.words, args.orders, args.nltk_words = 200_000, "3", 20_000
        args.presets, args.steps = "tiny,tiny-bert", 5
    work = Path(tempfile.mkdtemp(prefix="gym-train-bench-"))
    figures: dict[str, Any] = {"ngram": [], "nltk": [], "causal": [], "masked": []}
    try:
        corpus = work / "corpus.txt"
        started = time.perf_counter()
        lines = generate_corpus(corpus, args.words)
        print(
            f"corpus: {args.words:,} words, {lines:,} lines ({time.perf_counter() - started:.1f} s)"
        )
        for order in (int(o) for o in args.orders.split(",") if o):
            result = _in_child(_ngram_child, str(corpus), order, str(work / f"ngram-{order}"))
            figures["ngram"].append(result)
            print(
                f"n-gram order {order}: {result['words_per_second']:,} words/s "
                f"({result['seconds']} s; {result['words_per_cpu_second']:,} words per CPU "
                f"second, {result['cpu_seconds']} s), peak {result['peak_mb']:,} MB, "
                f"{result['ngrams']}, ARPA {result['arpa_mb']} MB"
            )
            shutil.rmtree(work / f"ngram-{order}", ignore_errors=True)
            if not args.nltk_words:
                continue
            try:
                import nltk  # noqa: F401
            except ImportError:
                print("  nltk is not installed: no comparison")
                continue
            result = _in_child(_nltk_child, str(corpus), order, args.nltk_words)
            figures["nltk"].append(result)
            print(
                f"  nltk.lm KneserNeyInterpolated order {order} on {result['words']:,} words: "
                f"{result['words_per_second']:,} words/s (fit only), peak {result['peak_mb']:,} MB"
            )
        measured_peak = 0.0
        if args.measure_peak and args.device.startswith("cuda"):
            measured_peak = figures["matmul_tflops"] = matmul_tflops(args.device)
            print(f"bf16 8192^3 matrix product: {measured_peak} TFLOP/s")
        batches = [int(b) for b in args.micro_batches.split(",") if b] or [0]
        modes = [m for m in args.compile.split(",") if m]
        variants = [(b, m) for b in batches for m in modes]
        if args.variants:
            pairs = [v.split(":") for v in args.variants.split(",") if v]
            variants = [(int(b), m) for b, m in pairs]
        device_counts = [int(d) for d in args.devices.split(",") if d]
        for preset in filter(None, args.presets.split(",")):
            for (micro_batch, mode), devices in ((v, d) for v in variants for d in device_counts):
                result = causal_throughput(
                    corpus,
                    preset,
                    args.steps,
                    args.device,
                    work,
                    args.peak_tflops,
                    micro_batch,
                    mode,
                    devices,
                    args.batch_tokens,
                )
                figures[result["objective"]].append(result)
                if args.json:  # as it goes: a run stopped at a time limit keeps what it had
                    Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")
                extra = ""
                if "model_tflops" in result:
                    extra = f", {result['model_tflops']} model TFLOP/s"
                if "mfu" in result:
                    extra += f", MFU {result['mfu']:.1%} of {args.peak_tflops:g}"
                if measured_peak and "model_tflops" in result:
                    extra += f" ({result['model_tflops'] / measured_peak:.1%} of measured)"
                if "peak_gpu_mb" in result:
                    extra += f", peak {result['peak_gpu_mb']:,} MB"
                print(
                    f"{result['objective']} {preset} on {args.device} x {devices} "
                    f"({result['threads']} threads each), "
                    f"micro-batch {result['micro_batch']}, "
                    f"{'compiled' if result['compiled'] else 'eager'}: "
                    f"{result['tokens_per_second']:,} tokens/s, "
                    f"{result['steps_per_second']} steps/s, "
                    f"{result['parameters']:,} parameters{extra}; "
                    f"first step {result['first_step_seconds']} s",
                    flush=True,
                )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
