"""Probing speed: sentence vectors of every layer, and a probe per layer, at full size.

A synthetic SentEval-sized task (100,000 tr / 10,000 va / 10,000 te sentences of 5 to
28 words, label planted in one token: the main verb's tense) is probed with the
GPT-2-small-shaped benchmark model of benchmarks/scoring.py (12 layers, 768 wide, random
init; the same saved folder). It prints:

- extraction speed (sentences/s) of `evaluations.probing.extract.extract_features` against a
  plain transformers loop (AutoModel, `output_hidden_states=True`, batches of 32 in file
  order, padded, masked mean in float32), on the same first `--compare` sentences, and
  the speed-up;
- the whole task through `probe_task`: extraction time for all sentences, probe training
  time for all 13 layers, the chosen layer and its accuracies;
- what the control task, the seeds and MDL cost: the same vectors probed at every layer
  with one seed and no control, with the control, with 3 seeds, with both (a run's
  default), and with MDL too; seconds and the factor over the single probe;
- peak memory (resident set of this process; on a GPU also the device's peak);
- the import of the task as a file into the database (`probing_task_import`; a
  throw-away SQLite database unless DATABASE_URL is set).

    .venv/bin/python benchmarks/probing.py                    # full size (long on a CPU)
    .venv/bin/python benchmarks/probing.py --train 20000 --valid 2000 --test 2000
    .venv/bin/python benchmarks/probing.py --smoke            # tiny model, < 1 minute
    .venv/bin/python benchmarks/probing.py --device cuda --dtype bf16
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks.end_to_end import throwaway_database  # noqa: E402

_SUBJECTS = ["the old man", "she", "my brother", "the children", "nobody", "the captain"]
_OBJECTS = ["the door", "a letter", "his hands", "the river", "her coat", "the window"]
_ADVERBS = ["slowly", "again", "quietly", "at last", "without a word", "once more"]
_TAILS = [
    "before the sun came up",
    "while the others waited outside",
    "because there was nothing else to do",
    "and the room fell silent",
    "as if nothing had happened",
    "in the middle of the night",
]
_VERBS = {
    "PAST": ["opened", "watched", "closed", "found", "held", "left"],
    "PRES": ["opens", "watches", "closes", "finds", "holds", "leaves"],
}


def synthetic_task(n_train: int, n_valid: int, n_test: int, seed: int = 0) -> list[Any]:
    """ProbingInstances whose label (PAST/PRES) is the form of the one main verb."""
    from suites.formats.probing import ProbingInstance

    rng = random.Random(seed)
    out = []
    line = 0
    for partition, size in (("tr", n_train), ("va", n_valid), ("te", n_test)):
        for _ in range(size):
            line += 1
            label = rng.choice(("PAST", "PRES"))
            verb = rng.choice(_VERBS[label])
            words = [rng.choice(_SUBJECTS), verb, rng.choice(_OBJECTS)]
            for _extra in range(rng.randint(0, 3)):
                words.append(rng.choice(_ADVERBS if rng.random() < 0.5 else _TAILS))
            sentence = " ".join(words) + " ."
            sentence = sentence[0].upper() + sentence[1:]
            # The verb is field #3, as in SentEval's full release: a frequency baseline.
            out.append(ProbingInstance(line, partition, label, sentence, extra=(verb,)))
    return out


def plain_loop(model_dir: Path, texts: list[str], device: str, dtype: str) -> tuple[Any, float]:
    """What one writes without Gym: AutoModel, batches of 32, output_hidden_states=True."""
    import numpy as np
    import torch
    from transformers import AutoModel, AutoTokenizer

    from evaluations.scoring.loaded import DTYPES

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModel.from_pretrained(model_dir, dtype=DTYPES[dtype]).to(device).eval()
    layers: list[list[Any]] = []
    with torch.inference_mode():
        model(**tokenizer(texts[:2], padding=True, return_tensors="pt").to(device))  # warm-up
        started = time.perf_counter()
        for low in range(0, len(texts), 32):
            batch = tokenizer(texts[low : low + 32], padding=True, return_tensors="pt").to(device)
            states = model(**batch, output_hidden_states=True).hidden_states
            mask = batch["attention_mask"].unsqueeze(-1).float()
            pooled = [(h.float() * mask).sum(1) / mask.sum(1) for h in states]
            if not layers:
                layers = [[] for _ in states]
            for k, vectors in enumerate(pooled):
                layers[k].append(vectors.cpu().numpy())
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        seconds = time.perf_counter() - started
    return [np.concatenate(parts) for parts in layers], seconds


def measure_import(instances: list[Any]) -> dict[str, Any]:
    """Seconds to import the task as a file through `probing_task_import` (throw-away
    SQLite database unless DATABASE_URL is set)."""
    tmp = Path(tempfile.mkdtemp(prefix="gym-probing-bench-"))
    throwaway_database(tmp, debug=False)
    from suites.probing.services import probing_task_import

    path = tmp / "synthetic_tense.txt"
    path.write_text(
        "".join(f"{i.partition}\t{i.label}\t{i.sentence}\n" for i in instances), encoding="utf-8"
    )
    started = time.perf_counter()
    task = probing_task_import(source=path, name=f"bench-{time.time_ns()}", owner=None)
    seconds = time.perf_counter() - started
    return {
        "lines": task.instance_count,
        "megabytes": round(path.stat().st_size / 1e6, 2),
        "seconds": round(seconds, 2),
        "database": os.environ["DATABASE_URL"].split(":", 1)[0],
        "run_payload": measure_payload(task),
    }


def measure_payload(task: Any) -> dict[str, Any]:
    """What a probing run of the imported task sends to its GPU worker: seconds to read
    the instances into the payload, and its size as JSON and zlib-compressed (the
    message's compression)."""
    import zlib

    from evaluations.models import LanguageModel, ProbingRun
    from evaluations.probing.services import probing_payload

    model = LanguageModel.objects.create(name=f"bench-{time.time_ns()}", source="bench/model")
    run = ProbingRun.objects.create(model=model, task=task, content_hash=task.content_hash)
    started = time.perf_counter()
    payload = probing_payload(run)
    seconds = time.perf_counter() - started
    text = json.dumps(payload, separators=(",", ":")).encode("utf-8")
    return {
        "seconds": round(seconds, 2),
        "json_megabytes": round(len(text) / 1e6, 2),
        "zlib_megabytes": round(len(zlib.compress(text)) / 1e6, 2),
    }


CONTROL_SETTINGS = {
    "one_seed": {"seeds": 1, "control": False, "mdl": False},
    "one_seed_control": {"seeds": 1, "control": True, "mdl": False},
    "three_seeds": {"seeds": 3, "control": False, "mdl": False},
    "three_seeds_control": {"seeds": 3, "control": True, "mdl": False},
    "three_seeds_control_mdl": {"seeds": 3, "control": True, "mdl": True},
}


def measure_controls(lm: Any, instances: list[Any], args: argparse.Namespace) -> dict[str, Any]:
    """Seconds to probe every layer of vectors extracted once, for each setting, and the
    factor over one seed without control (the probe as it was before)."""
    from evaluations.probing.extract import extract_features
    from evaluations.probing.run import LayerPlan, label_arrays, probe_layers

    labels, rows, y = label_arrays(instances)
    task = {"name": "synthetic_tense", "type": "past_present"}
    features = extract_features(
        lm,
        [item.sentence for item in instances],
        token_budget=args.token_budget,
        memory_limit_bytes=args.memory_mb * 1024**2,
    )
    # Rounds over all settings, each setting's best kept: on a shared machine the load
    # changes from one moment to the next, and the first fits of a process pay warm-up.
    # CPU seconds of this process beside wall-clock: other jobs on the machine lengthen
    # the wall-clock, not the work.
    seconds: dict[str, float] = {}
    cpu: dict[str, float] = {}
    with features:
        for _round in range(max(1, args.rounds)):
            for name, setting in CONTROL_SETTINGS.items():
                plan = LayerPlan.of(
                    instances, rows, y, len(labels), task, args.probe, device=args.device, **setting
                )
                started, started_cpu = time.perf_counter(), time.process_time()
                probe_layers(features, plan, None)
                took = round(time.perf_counter() - started, 3)
                took_cpu = round(time.process_time() - started_cpu, 3)
                seconds[name] = min(took, seconds.get(name, took))
                cpu[name] = min(took_cpu, cpu.get(name, took_cpu))
    base = max(cpu["one_seed"], 1e-9)
    return {
        "probe": args.probe,
        "rounds": max(1, args.rounds),
        "layers": features.n_layers,
        "seconds": seconds,
        "cpu_seconds": cpu,
        "factor_over_one_seed_cpu": {name: round(value / base, 2) for name, value in cpu.items()},
        "extra_cpu_seconds_default_run": round(cpu["three_seeds_control"] - cpu["one_seed"], 3),
    }


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux: KiB


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--smoke", action="store_true", help="tiny model, tiny task")
    parser.add_argument("--train", type=int, default=100_000)
    parser.add_argument("--valid", type=int, default=10_000)
    parser.add_argument("--test", type=int, default=10_000)
    parser.add_argument(
        "--compare",
        type=int,
        default=2_000,
        help="sentences timed against the plain loop (0: skip the comparison)",
    )
    parser.add_argument("--model-dir", type=Path, default=None)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--probe", default="logreg", choices=("logreg", "mlp"))
    parser.add_argument("--token-budget", type=int, default=None)
    parser.add_argument("--memory-mb", type=int, default=2048)
    parser.add_argument("--skip-full", action="store_true", help="only the extraction comparison")
    parser.add_argument("--skip-import", action="store_true", help="do not time the import")
    parser.add_argument(
        "--skip-controls", action="store_true", help="do not time controls, seeds and MDL"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="rounds of the controls' settings (best kept)"
    )
    parser.add_argument(
        "--threads", type=int, default=0, help="torch CPU threads (default: torch's own)"
    )
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = parser.parse_args()
    if args.smoke:
        args.train, args.valid, args.test, args.compare = 400, 100, 100, 200
        args.threads = args.threads or 1  # tiny matrices: a second thread only waits

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    from benchmarks.scoring import DEFAULT_SUITES, build_gpt2_small, build_tiny, load_suites
    from evaluations.probing.extract import extract_features
    from evaluations.probing.run import probe_task
    from evaluations.scoring import build_sentence, load_model

    cache = Path(tempfile.gettempdir()) / "gym-bench"
    if args.smoke:
        model_dir = build_tiny(args.model_dir or cache / "tiny-gpt2-256")
    else:
        # The scoring benchmark's model: its tokenizer is trained on the suites' text.
        texts = [build_sentence(regions)[0] for regions in load_suites(DEFAULT_SUITES, None)]
        model_dir = build_gpt2_small(args.model_dir or cache / "gpt2-small-random", texts)

    instances = synthetic_task(args.train, args.valid, args.test)
    sentences = [item.sentence for item in instances]
    figures: dict[str, Any] = {
        "model": str(model_dir),
        "device": args.device,
        "dtype": args.dtype,
        "torch_threads": torch.get_num_threads(),
        "sizes": {"tr": args.train, "va": args.valid, "te": args.test},
        # Other work on the machine skews every figure; the load average shows how much.
        "load_average_start": os.getloadavg(),
    }
    if not args.skip_import:
        figures["import"] = measure_import(instances)
        print(json.dumps({"import": figures["import"]}, indent=2), flush=True)

    lm = load_model(str(model_dir), device=args.device, dtype=args.dtype)
    figures["layers"] = lm.model.config.num_hidden_layers + 1
    figures["width"] = lm.model.config.hidden_size

    # 1. Extraction, against the plain loop, on the same sentences (distinct ones, so
    # that the engine's de-duplication is not what is measured).
    if args.compare > 0:
        subset = list(dict.fromkeys(sentences))[: args.compare]
        extract_features(lm, subset[:8])  # warm-up
        started = time.perf_counter()
        extract_features(lm, subset, token_budget=args.token_budget).close()
        if args.device.startswith("cuda"):
            torch.cuda.synchronize()
        ours_seconds = time.perf_counter() - started
        # The plain loop's vectors are not compared: it pools over every token it is given
        # and adds no BOS, so they differ from ours by design (tests check ours by hand).
        _plain, plain_seconds = plain_loop(model_dir, subset, args.device, args.dtype)
        figures["compare"] = {
            "sentences": len(subset),
            "engine_sentences_per_s": round(len(subset) / ours_seconds, 1),
            "plain_batch32_sentences_per_s": round(len(subset) / plain_seconds, 1),
            "speedup": round(plain_seconds / ours_seconds, 2),
        }
        print(json.dumps({"compare": figures["compare"]}, indent=2), flush=True)

    # 2. The whole task, as a run would do it.
    if not args.skip_full:
        if args.device.startswith("cuda"):
            torch.cuda.reset_peak_memory_stats()
        rss_before = peak_rss_mib()
        doc = probe_task(
            lm,
            instances,
            task={"name": "synthetic_tense", "type": "past_present"},
            probe=args.probe,
            token_budget=args.token_budget,
            memory_limit_bytes=args.memory_mb * 1024**2,
        )
        diagnostics = doc["diagnostics"]
        figures["full"] = {
            "sentences": len(instances),
            "distinct_sentences": len(set(sentences)),
            "extraction_seconds": diagnostics["seconds_vectors"],
            "extraction_sentences_per_s": round(
                len(instances) / max(diagnostics["seconds_vectors"], 1e-9), 1
            ),
            "probe": args.probe,
            "probe_seconds_all_layers": diagnostics["seconds_probes"],
            "vectors_on_disk": diagnostics["vectors_on_disk"],
            "best_layer": doc["best_layer"],
            "best_va_accuracy": round(doc["best"]["va_accuracy"], 4),
            "best_te_accuracy": round(doc["best"]["te_accuracy"], 4),
            "majority_te_accuracy": round(doc["baselines"]["majority"]["te_accuracy"], 4),
            "length_te_accuracy": round(doc["baselines"]["length"]["te_accuracy"], 4),
            "frequency_te_accuracy": doc["baselines"]["frequency"]["te_accuracy"],
            "seeds": len(doc["seeds"]),
            "best_selectivity": doc["best_selectivity"],
            "peak_rss_mib_before": round(rss_before, 1),
            "peak_rss_mib": round(peak_rss_mib(), 1),
        }
        if args.device.startswith("cuda"):
            figures["full"]["peak_gpu_mib"] = round(torch.cuda.max_memory_allocated() / 2**20, 1)
    # 3. The control task, the seeds and MDL: the same vectors, probed every way.
    if not args.skip_controls:
        figures["controls"] = measure_controls(lm, instances, args)
        print(json.dumps({"controls": figures["controls"]}, indent=2), flush=True)
    figures["load_average_end"] = os.getloadavg()
    print(json.dumps(figures, indent=2))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")


if __name__ == "__main__":
    main()
