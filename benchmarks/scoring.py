"""Scoring speed: this engine against a plain transformers loop and minicons.

Scores every sentence of the SyntaxGym 2020 suites with a GPT-2-small-shaped model
(12 layers, 768 wide, 50,257-token output layer, random init, byte-level BPE trained
here) and prints tokens per second for each method, plus the largest difference
between the engine's token surprisals and the plain loop's.

    .venv/bin/python benchmarks/scoring.py                 # full workload (minutes on CPU)
    .venv/bin/python benchmarks/scoring.py --smoke         # tiny model, two suites, < 60 s
    .venv/bin/python benchmarks/scoring.py --device cuda --dtype bf16 --peak-tflops 989
    .venv/bin/python benchmarks/scoring.py --end-to-end    # as a user runs it, load included

`--end-to-end` times `manage.py score --model M --suite ...` in a fresh process (imports,
model load and load-time checks included) against minicons run the same way, and
prints what one process pays before its first sentence (imports, model load, checks).

minicons runs in its own environment (`--minicons-python`, default
`.venv-minicons/bin/python` when it exists), as a subprocess of this script in
`--minicons-worker` mode; the worker imports nothing from this repository.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
# The shared data as the tests find it: GYM_SHARED_DATA, else ../shared/data.
DEFAULT_SUITES = (
    Path(os.environ.get("GYM_SHARED_DATA", REPO.parent / "shared" / "data"))
    / "syntaxgym-2020"
    / "nextflow"
)
DEFAULT_MINICONS_PYTHON = REPO / ".venv-minicons" / "bin" / "python"
LN2 = math.log(2.0)


# The eight suites issue 26 measured the command on (`--suite-names issue`).
ISSUE_SUITES = (
    "number_src,npz_ambig,subordination,fgd_object,cleft,center_embed_mod,mvrr,reflexive_src_fem"
)
SUITE_NAMES: str | None = None  # set by --suite-names: comma-separated suite file stems


def load_suites(folder: Path, limit: int | None) -> list[list[str]]:
    """Region lists of every condition of every item, suites in name order."""
    files = suite_files(folder, limit)
    if not files:
        raise SystemExit(f"no suites found in {folder}")
    sentences: list[list[str]] = []
    for path in files:
        suite = json.loads(path.read_text())
        for item in suite["items"]:
            for condition in item["conditions"]:
                sentences.append([region["content"] for region in condition["regions"]])
    return sentences


def suite_files(folder: Path, limit: int | None) -> list[Path]:
    """The suites named by --suite-names (in that order), else the first `limit`."""
    if SUITE_NAMES:
        names = [n.strip() for n in SUITE_NAMES.split(",") if n.strip()]
        missing = [n for n in names if not (folder / f"{n}.json").is_file()]
        if missing:
            raise SystemExit(f"no such suites in {folder}: {', '.join(missing)}")
        return [folder / f"{n}.json" for n in names]
    return sorted(folder.glob("*.json"))[:limit]


def build_gpt2_small(folder: Path, texts: list[str]) -> Path:
    """GPT-2-small shape, random init; a byte-level BPE trained on `texts`."""
    from evaluations.baseline import random_gpt2

    if (folder / "config.json").exists():
        return folder
    return random_gpt2(folder, texts, vocab_size=50257, n_layer=12, n_head=12, output_rows=50257)


def build_tiny(folder: Path) -> Path:
    from tests.tiny_models import make_gpt2

    folder.mkdir(parents=True, exist_ok=True)
    return make_gpt2(folder, n_positions=256)


def plain_loop(
    model_dir: Path, texts: list[str], device: str, dtype: str
) -> tuple[list[list[float]], float]:
    """One sentence at a time: BOS + tokens, full float32 log-softmax, no batching.

    The model is loaded plainly (no kernel swaps) in the engine's dtype.
    """
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from evaluations.scoring.loaded import DTYPES

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=DTYPES[dtype])
    model = model.to(device).eval()
    bos = tokenizer.bos_token_id
    out: list[list[float]] = []
    with torch.inference_mode():
        model(torch.tensor([[bos]], device=device))  # warm-up
        started = time.perf_counter()
        for text in texts:
            ids = tokenizer(text, add_special_tokens=False)["input_ids"]
            logits = model(torch.tensor([[bos, *ids]], device=device)).logits[0, :-1].float()
            logp = logits.log_softmax(-1)
            rows = torch.arange(len(ids), device=device)
            picked = logp[rows, torch.tensor(ids, device=device)]
            out.append((-picked / LN2).tolist())
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
    return out, seconds


def minicons_worker(args: argparse.Namespace) -> None:
    """Runs inside the minicons environment; prints one JSON line."""
    import torch
    from minicons import scorer

    texts = json.loads(Path(args.sentences).read_text())
    lm = scorer.IncrementalLMScorer(str(args.model_dir), args.device)
    lm.token_score(texts[:2], surprisal=True, base_two=True, bos_token=True)  # warm-up
    tokens = 0
    started = time.perf_counter()
    for low in range(0, len(texts), args.batch_size):
        batch = texts[low : low + args.batch_size]
        for scored in lm.token_score(batch, surprisal=True, base_two=True, bos_token=True):
            tokens += len(scored) - 1  # the BOS entry carries no surprisal
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    seconds = time.perf_counter() - started
    print(json.dumps({"tokens": tokens, "seconds": seconds}))


def run_minicons(
    python: Path, model_dir: Path, texts: list[str], batch_size: int, device: str
) -> dict[str, Any]:
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump(texts, handle)
    try:
        completed = subprocess.run(
            [
                str(python),
                str(Path(__file__).resolve()),
                "--minicons-worker",
                "--model-dir",
                str(model_dir),
                "--sentences",
                handle.name,
                "--batch-size",
                str(batch_size),
                "--device",
                device,
            ],
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        os.unlink(handle.name)
    if completed.returncode != 0:
        tail = completed.stderr.strip().splitlines()[-1:] or ["no output"]
        return {"error": tail[0]}
    return json.loads(completed.stdout.strip().splitlines()[-1])


def flops_per_position(config: Any, context: float) -> float:
    """Forward FLOPs of one token position through the transformer body (no head)."""
    d, layers = config.n_embd, config.n_layer
    inner = config.n_inner or 4 * d
    matmuls = layers * (2 * (4 * d * d) + 2 * (2 * d * inner))  # qkv+proj, mlp
    attention = layers * 2 * 2 * d * context  # scores and weighted sum
    return matmuls + attention


# Run in a fresh interpreter: what a worker or a `score` process pays once, before its
# first sentence. Prints one JSON line.
STARTUP_PROBE = """
import json, os, sys, time
started = time.perf_counter()
import torch, transformers
imported = time.perf_counter()
sys.path.insert(0, sys.argv[2])
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gym.settings")
import django
django.setup()
from evaluations.scoring import load_model
ready = time.perf_counter()
lm = load_model(sys.argv[1])
loaded = time.perf_counter()
print(json.dumps({"imports": imported - started, "django": ready - imported,
                  "load_model": loaded - ready, "steps": lm.timings}))
"""


def startup(model_dir: Path, repeat: int) -> dict[str, Any]:
    """Once-per-process costs, for a model seen for the first time and again later.

    The first process on a machine runs the load-time checks and records them in the
    check cache (GYM_SCORING_CACHE, here a fresh folder); later processes read them.
    """
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "GYM_SCORING_CACHE": cache, "HF_HUB_OFFLINE": "1"}
        for label in ("first process", "later process"):
            runs = []
            for _ in range(repeat if label == "later process" else 1):
                done = subprocess.run(
                    [sys.executable, "-c", STARTUP_PROBE, str(model_dir), str(REPO)],
                    capture_output=True,
                    text=True,
                    env=env,
                    check=False,
                )
                if done.returncode != 0:
                    raise SystemExit(f"startup probe failed: {done.stderr[-2000:]}")
                runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
            total = statistics.median(r["imports"] + r["django"] + r["load_model"] for r in runs)
            middle = sorted(runs, key=lambda r: r["imports"] + r["django"] + r["load_model"])
            shown = middle[len(middle) // 2]
            figures[label] = {"total": total, **shown}
            steps = ", ".join(f"{k} {v:.2f}" for k, v in shown["steps"].items())
            print(
                f"startup, {label:14} {total:6.2f} s: imports {shown['imports']:.2f}, "
                f"django {shown['django']:.2f}, load_model {shown['load_model']:.2f} "
                f"({steps})"
            )
    return figures


def time_breakdown(runs: list[dict[str, Any]], walls: list[float]) -> dict[str, float]:
    """Medians of each step of `manage.py score --timings`: the interpreter, imports and
    Django before the command ran; reading the suites; the model load's steps (config
    and tokenizer, weights, the load-time checks or reading their cached answers);
    scoring (forward passes and metrics); writing the results; and what the process
    spent after that (exit) as the rest of the wall-clock time."""
    rows: list[dict[str, float]] = []
    for run, wall in zip(runs, walls, strict=False):
        steps = run.get("load_steps", {})
        row = {
            "python, imports, django": run.get("before_handle") or 0.0,
            "reading suites": run["read_suites"],
            "config and tokenizer": steps.get("config_and_tokenizer", 0.0),
            "weights": steps.get("weights", 0.0),
            "checks": steps.get("head_check", 0.0)
            + steps.get("tree_check", 0.0)
            + steps.get("checks_cached", 0.0),
            "scoring": run["scoring"],
            "writing": run["writing"],
        }
        counted = sum(row.values())
        row["other load steps"] = max(0.0, run["load_model"] - sum(steps.values()))
        row["exit and the rest"] = max(0.0, wall - counted - row["other load steps"])
        rows.append(row)
    return {key: statistics.median(r[key] for r in rows) for key in rows[0]}


def end_to_end(
    args: argparse.Namespace, model_dir: Path, files: list[Path], texts: list[str]
) -> dict[str, Any]:
    """`manage.py score` as a user runs it against minicons run the same way: wall-clock
    seconds of a fresh process each, model load included. The methods take turns, run
    after run, so that a change in the machine's load hits them alike; medians over
    --repeat rounds."""
    figures: dict[str, Any] = {"suites": len(files), "sentences": len(texts)}
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    python = args.minicons_python or DEFAULT_MINICONS_PYTHON
    sizes = [int(s) for s in args.minicons_batch_sizes.split(",") if s.strip()]
    if sizes and not python.exists():
        print(f"minicons: not measured, no minicons environment at {python}")
        sizes = []
    walls: dict[str, list[float]] = {"command": [], **{f"minicons_b{b}": [] for b in sizes}}
    inner: dict[str, list[float]] = {key: [] for key in walls}
    tokens = 0
    breakdowns: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as out:
        command = [sys.executable, str(REPO / "manage.py"), "score", "--model", str(model_dir)]
        for path in files:
            command += ["--suite", str(path)]
        command += ["--out", out, "--timings"]
        for _ in range(args.repeat):
            started = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, env=env, check=False)
            walls["command"].append(time.perf_counter() - started)
            if done.returncode != 0:
                raise SystemExit(f"manage.py score failed: {done.stderr[-2000:]}")
            for line in done.stderr.splitlines():
                if line.startswith("timings "):
                    breakdowns.append(json.loads(line.removeprefix("timings ")))
            for size in sizes:
                started = time.perf_counter()
                result = run_minicons(python, model_dir, texts, size, args.device)
                if "error" in result:
                    raise SystemExit(f"minicons b={size} failed: {result['error']}")
                walls[f"minicons_b{size}"].append(time.perf_counter() - started)
                inner[f"minicons_b{size}"].append(result["seconds"])
        tokens = sum(
            json.loads(path.read_text())["results"]["diagnostics"]["tokens"]
            for path in Path(out).glob("*.json")
        )
    command_s = statistics.median(walls["command"])
    figures["command"] = {"seconds": walls["command"], "median_s": command_s, "tokens": tokens}
    runs = ", ".join(f"{s:.1f}" for s in walls["command"])
    print(
        f"manage.py score, {len(files)} suites, {len(texts)} sentences: {command_s:.1f} s "
        f"median of {len(walls['command'])} ({tokens / command_s:.0f} tokens/s end to end; "
        f"runs {runs})"
    )
    if breakdowns:
        figures["command"]["where"] = where = time_breakdown(breakdowns, walls["command"])
        starts = statistics.median(
            (b.get("before_handle") or 0.0) + b["read_suites"] + b["load_model"] for b in breakdowns
        )
        figures["command"]["scoring_starts_s"] = starts
        print(f"  scoring starts {starts:.2f} s after the process starts (median)")
        print(
            "  where the command's time went (median of the runs): "
            + ", ".join(f"{step} {seconds:.2f} s" for step, seconds in where.items())
        )
    best: float | None = None
    for size in sizes:
        key = f"minicons_b{size}"
        wall = statistics.median(walls[key])
        figures[key] = {
            "seconds": walls[key],
            "median_s": wall,
            "scoring_only_median_s": statistics.median(inner[key]),
        }
        best = wall if best is None else min(best, wall)
        runs = ", ".join(f"{s:.1f}" for s in walls[key])
        print(
            f"minicons b={size}, fresh process: {wall:.1f} s median (runs {runs}; scoring "
            f"alone {statistics.median(inner[key]):.1f} s)"
        )
    if best is not None:
        figures["speedup_vs_best_minicons"] = best / command_s
        print(f"end to end, best minicons / manage.py score: {best / command_s:.2f}x")
    figures["startup"] = startup(model_dir, args.repeat)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="tiny model, two suites")
    parser.add_argument("--suites-dir", type=Path, default=DEFAULT_SUITES)
    parser.add_argument("--suites", type=int, default=None, help="use only the first N suites")
    parser.add_argument(
        "--suite-names",
        default=None,
        help="comma-separated suite names (file stems) instead of the first N; "
        "'issue' for the eight issue 26 measured",
    )
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--token-budget", type=int, default=None)
    parser.add_argument(
        "--peak-tflops", type=float, default=989.0, help="GPU peak (H100 bf16 dense)"
    )
    parser.add_argument("--skip-plain", action="store_true")
    parser.add_argument("--skip-unshared", action="store_true")
    parser.add_argument("--minicons-python", type=Path, default=None)
    parser.add_argument("--minicons-batch-sizes", default="1,32")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--end-to-end",
        action="store_true",
        help="time `manage.py score` over the suites, model load included, against "
        "minicons run the same way; print the once-per-process startup",
    )
    parser.add_argument("--repeat", type=int, default=1, help="end-to-end runs per method")
    # Worker mode, used by the subprocess in the minicons environment.
    parser.add_argument("--minicons-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--sentences", help=argparse.SUPPRESS)
    parser.add_argument("--batch-size", type=int, default=1, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.minicons_worker:
        minicons_worker(args)
        return

    global SUITE_NAMES
    SUITE_NAMES = ISSUE_SUITES if args.suite_names == "issue" else args.suite_names
    sys.path.insert(0, str(REPO))
    import torch

    from evaluations.scoring import build_sentence, load_model, model_info, score_sentences
    from evaluations.scoring.causal import plan_sequences, work_stats
    from evaluations.scoring.prefix import PrefixTrie

    suites = args.suites if args.suites is not None else (2 if args.smoke else None)
    sentences = load_suites(args.suites_dir, suites)
    texts = [build_sentence(regions)[0] for regions in sentences]
    cache = Path(tempfile.gettempdir()) / "gym-bench"
    if args.smoke:
        model_dir = build_tiny(args.model_dir or cache / "tiny-gpt2-256")
    else:
        model_dir = build_gpt2_small(args.model_dir or cache / "gpt2-small-random", texts)
    if args.end_to_end:
        figures = end_to_end(args, model_dir, suite_files(args.suites_dir, suites), texts)
        figures["load_average"] = os.getloadavg()
        print(f"load average at the end: {figures['load_average']}")
        if args.json:
            args.json.write_text(json.dumps(figures, indent=2))
        return
    figures: dict[str, Any] = {
        "sentences": len(sentences),
        "unique_sentences": len(set(texts)),
        "device": args.device,
        "dtype": args.dtype,
        "torch_threads": torch.get_num_threads(),
        # Other work on the machine skews every figure; the load average shows how much.
        "load_average_start": os.getloadavg(),
    }

    lm = load_model(str(model_dir), device=args.device, dtype=args.dtype)
    info = model_info(lm)
    print(f"model: {model_dir} ({info['n_params'] / 1e6:.1f}M parameters, {lm.dtype}, {lm.device})")
    budget = args.token_budget
    score_sentences(lm, sentences[:8], token_budget=budget)  # warm-up

    def timed(sharing: bool) -> tuple[list[Any], float]:
        if lm.device.startswith("cuda"):
            torch.cuda.synchronize()
        started = time.perf_counter()
        results = score_sentences(lm, sentences, token_budget=budget, prefix_sharing=sharing)
        if lm.device.startswith("cuda"):
            torch.cuda.synchronize()
        return results, time.perf_counter() - started

    engine, seconds = timed(True)
    tokens = sum(len(r.tokens) for r in engine)
    figures["tokens"] = tokens
    figures["engine"] = {"seconds": seconds, "tokens_per_s": tokens / seconds}
    unique = {t: i for i, t in enumerate(texts)}
    ids = [lm.tokenizer(t, add_special_tokens=False)["input_ids"] for t in unique]
    sequences, _ = plan_sequences(ids, lm.bos_token_id, lm.context_length)
    from evaluations.scoring.engine import default_token_budget

    used_budget = budget or default_token_budget(lm)
    shared_stats = work_stats(sequences, token_budget=used_budget, prefix_sharing=True)
    plain_stats = work_stats(sequences, token_budget=used_budget, prefix_sharing=False)
    full_trie = PrefixTrie()
    for content in ids:
        full_trie.insert([lm.bos_token_id, *content])
    figures["work"] = {
        "shared": shared_stats,
        "unshared": plain_stats,
        "tokens_with_bos": tokens + len(sentences),
        "full_trie_nodes": len(full_trie),
    }
    print(f"sentences: {len(sentences)} ({len(unique)} unique), scored tokens: {tokens}")
    print(
        f"work: {tokens + len(sentences)} tokens with BOS; a trie of all of them has "
        f"{len(full_trie)} nodes, {shared_stats['trie_nodes']} without the final tokens "
        f"(never inputs); positions run "
        f"{shared_stats['positions']} (padded {shared_stats['padded_positions']}) "
        f"vs {plain_stats['positions']} unshared; output-layer rows "
        f"{shared_stats['head_rows']} vs {plain_stats['head_rows']}"
    )
    print(f"engine (prefix sharing):      {tokens / seconds:9.1f} tokens/s  ({seconds:.1f} s)")

    config = lm.model.config
    body = flops_per_position(config, context=12.0)
    head = 2 * config.n_embd * lm.vocab_size
    executed = shared_stats["padded_positions"] * body + shared_stats["head_rows"] * head
    figures["engine"]["flops_per_s"] = executed / seconds
    print(f"  executed {executed / 1e12:.2f} TFLOP -> {executed / seconds / 1e9:.1f} GFLOP/s")
    if lm.device.startswith("cuda"):
        share = executed / seconds / (args.peak_tflops * 1e12)
        figures["engine"]["peak_share"] = share
        print(f"  {share:.2%} of {args.peak_tflops:g} TFLOP/s peak")

    if not args.skip_unshared:
        unshared, seconds_unshared = timed(False)
        worst = max(
            (
                abs(a.surprisal - b.surprisal)
                for x, y in zip(engine, unshared, strict=True)
                for a, b in zip(x.tokens, y.tokens, strict=True)
            ),
            default=0.0,
        )
        figures["engine_unshared"] = {
            "seconds": seconds_unshared,
            "tokens_per_s": tokens / seconds_unshared,
            "max_diff_vs_shared_bits": worst,
        }
        print(
            f"engine (no prefix sharing):   {tokens / seconds_unshared:9.1f} tokens/s  "
            f"({seconds_unshared:.1f} s); largest difference to shared: {worst:.2e} bits"
        )

    if not args.skip_plain:
        reference, seconds_plain = plain_loop(model_dir, texts, lm.device, lm.dtype)
        worst = 0.0
        for result, expected in zip(engine, reference, strict=True):
            assert len(result.tokens) == len(expected)
            for token, value in zip(result.tokens, expected, strict=True):
                worst = max(worst, abs(token.surprisal - value))
        figures["plain_loop"] = {
            "seconds": seconds_plain,
            "tokens_per_s": tokens / seconds_plain,
            "max_diff_engine_vs_plain_bits": worst,
        }
        print(
            f"plain transformers loop:      {tokens / seconds_plain:9.1f} tokens/s  ({seconds_plain:.1f} s)"
        )
        print(f"largest |engine - plain loop|: {worst:.2e} bits")

    python = args.minicons_python or DEFAULT_MINICONS_PYTHON
    best = 0.0
    for size in [int(s) for s in args.minicons_batch_sizes.split(",") if s.strip()]:
        label = f"minicons token_score b={size}:"
        if not python.exists():
            print(f"{label:30}not measured: no minicons environment at {python}")
            continue
        result = run_minicons(python, model_dir, texts, size, lm.device)
        if "error" in result:
            print(f"{label:30}not measured: {result['error']}")
            continue
        rate = result["tokens"] / result["seconds"]
        best = max(best, rate)
        figures[f"minicons_b{size}"] = {**result, "tokens_per_s": rate}
        print(
            f"{label:30}{rate:9.1f} tokens/s  ({result['seconds']:.1f} s, {result['tokens']} tokens)"
        )
    if best:
        speedup = figures["engine"]["tokens_per_s"] / best
        figures["speedup_vs_best_minicons"] = speedup
        print(f"engine / best minicons: {speedup:.2f}x")
    figures["load_average_end"] = os.getloadavg()
    print(f"load average: start {figures['load_average_start']}, end {figures['load_average_end']}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
