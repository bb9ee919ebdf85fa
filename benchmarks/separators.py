"""What the end-of-text separator between training lines does to a learning curve.

Gym's causal trainer packs its training text as `<|endoftext|>` line `<|endoftext|>`
line ... and cuts the stream into context-length blocks (as GPT-2 did with documents):
every line follows the separator, which is how the scorer frames a sentence (the start
token, then the sentence). This trains two tiny models on the example corpus
(examples/corpora/example_corpus.txt), with the same tokenizer, seed and steps: one
as Gym trains ("separated"), one whose lines run together with no separator ("run
together"), and prints at each checkpoint:

- `alone`: the mean loss (nats a token) of the held-out lines scored as the scorer
  scores them, each alone after the separator;
- `first`: the same over each line's first token only, the one the framing decides;
- `pairs`: the accuracy on the example minimal pairs
  (examples/minimal_pairs/agreement_minimal_pairs.tsv), whole-sentence log probability.

    .venv/bin/python benchmarks/separators.py            # 300 steps each (minutes on CPU)
    .venv/bin/python benchmarks/separators.py --smoke    # 4 steps each (seconds)
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

CORPUS = REPO / "examples" / "corpora" / "example_corpus.txt"
PAIRS = REPO / "examples" / "minimal_pairs" / "agreement_minimal_pairs.tsv"


def pairs() -> list[tuple[str, str]]:
    """(expected, unexpected) sentences of the example pair set."""
    rows = list(csv.DictReader(PAIRS.open(encoding="utf-8"), delimiter="\t"))
    by_pair: dict[str, dict[str, str]] = {}
    for row in rows:
        by_pair.setdefault(row["pairid"], {})[row["comparison"]] = row["sentence"]
    return [(p["expected"], p["unexpected"]) for p in by_pair.values()]


def run_together(out: Path, separated: Path, source: Any, options: Any) -> None:
    """`out` prepared as the trainer would leave it before training, with the separated
    run's tokenizer and token files of the lines with no separator between them."""
    from transformers import AutoTokenizer

    from evaluations.training import causal

    causal.check_inputs(out, causal.training_inputs(source.training, source.validation, options))
    data = out / causal.DATA_DIR
    data.mkdir(parents=True)
    for item in (separated / causal.DATA_DIR).iterdir():
        if item.suffix != ".bin":
            shutil.copy(item, data / item.name)
    tokenizer = AutoTokenizer.from_pretrained(data)
    for name, lines in (("train.bin", source.training()), ("validation.bin", source.validation())):
        ids = tokenizer(list(lines), add_special_tokens=False)["input_ids"]
        np.asarray([t for line in ids for t in line], dtype=np.uint32).tofile(data / name)


def measure(folder: Path, held: list[str], pair_list: list[tuple[str, str]]) -> dict[str, float]:
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    eot = tokenizer.bos_token_id

    def token_logprobs(sentence: str) -> np.ndarray:
        ids = [eot, *tokenizer(sentence, add_special_tokens=False)["input_ids"]]
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids])).logits[0, :-1].float()
        logs = torch.log_softmax(logits, dim=-1)
        return logs.gather(1, torch.tensor(ids[1:])[:, None])[:, 0].numpy()

    scored = [token_logprobs(s) for s in held]
    right = sum(token_logprobs(a).sum() > token_logprobs(b).sum() for a, b in pair_list)
    return {
        "alone": round(float(-np.concatenate(scored).mean()), 4),
        "first": round(float(-np.mean([s[0] for s in scored])), 4),
        "pairs": round(right / len(pair_list), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    import torch

    from evaluations.training import causal
    from evaluations.training.data import corpus_file

    torch.set_num_threads(args.threads)
    steps = 4 if args.smoke else args.steps
    source = corpus_file(CORPUS)
    held = list(source.validation())
    pair_list = pairs()
    options = causal.CausalOptions(
        shape=causal.PRESETS["tiny"], steps=steps, micro_batch=8, checkpoints=4, seed=0
    )
    results: dict[str, Any] = {"steps": steps, "held_out_lines": len(held), "pairs": len(pair_list)}
    with tempfile.TemporaryDirectory() as tmp:
        separated, together = Path(tmp) / "separated", Path(tmp) / "together"
        for name, folder in (("separated", separated), ("run together", together)):
            if folder == together:
                run_together(together, separated, source, options)
            started = time.perf_counter()
            summary = causal.train_causal(source.training, source.validation, folder, options)
            curve = []
            for point in summary.checkpoints:
                figures = measure(folder / point["folder"], held, pair_list)
                curve.append({"tokens": point["tokens"], **figures})
                print(f"{name:>12}  {point['tokens']:>8,} tokens  {json.dumps(figures)}")
            results[name] = {"seconds": round(time.perf_counter() - started, 1), "curve": curve}
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
