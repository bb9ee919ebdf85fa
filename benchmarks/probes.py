"""Logistic-regression probes in a batch against scikit-learn layer by layer (issue 48).

Synthetic features of a probing task's shape (tr / va / te sentences, 13 layers of 768,
4 classes whose signal grows and then fades with depth, as real layers' do), the task's
labels and a control task's (a label per word type, as Hewitt and Liang's), 3 seeds and
the l2 grid of Gym's probes (0.1, 0.01, 0.001, 0.0001, chosen on va). Prints the time of

- Gym's batched fit (`fit_logreg_batched`: every layer, label set and seed as one
  batched problem, each probe with its own L-BFGS state), and
- scikit-learn's `LogisticRegression(solver="lbfgs")` fitted layer by layer, label set by
  label set, for each l2 of the grid (C = 1 / (l2 n), the same loss; lbfgs from zero is
  deterministic, so one fit stands for the 3 seeds: this counts a third of the fits
  Gym makes),

and the largest difference between their chosen probes' te accuracies; with
`--mdl-layers N`, the online code (MDL) of N layers with every block of every layer in
one batch against block by block.

    .venv/bin/python benchmarks/probes.py --train 20000       # minutes on 2 CPU cores
    .venv/bin/python benchmarks/probes.py --train 20000 --skip-sklearn --mdl-layers 13
    .venv/bin/python benchmarks/probes.py --smoke             # seconds

On a busy machine pass `--threads 1` with OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1: two
spinning threads on an oversubscribed CPU cost both sides many times the work (at load
15 on the 2-core VM a --smoke fit took 32 s with 2 threads and 1.3 s with one). The
full size (`--train 100000`) holds its features in memory, about 4.8 GB of float32,
plus a batch's standardised copies (2 GB) and scikit-learn's float64 copy of a layer.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

GRID = (1e-1, 1e-2, 1e-3, 1e-4)


def synthetic(
    n: dict[str, int], layers: int, width: int, classes: int, seed: int = 0
) -> tuple[list[dict[str, np.ndarray]], list[dict[str, np.ndarray]]]:
    """Each layer's features of each partition, and the task's and the control's labels."""
    rng = np.random.default_rng(seed)
    total = sum(n.values())
    y = rng.integers(0, classes, total)
    types = rng.integers(0, 500, total)  # each sentence's "word type"
    control = rng.integers(0, classes, 500)[types]
    means = rng.normal(size=(classes, width)).astype(np.float32)
    type_means = rng.normal(size=(500, width)).astype(np.float32)
    cuts = np.cumsum([0, *n.values()])
    part = {name: slice(cuts[i], cuts[i + 1]) for i, name in enumerate(n)}
    features = []
    for k in range(layers):
        signal = 0.15 * np.sin(np.pi * (k + 1) / (layers + 1))
        x = rng.normal(size=(total, width)).astype(np.float32)
        x += signal * means[y] + 0.1 * type_means[types]
        features.append({name: x[s] for name, s in part.items()})
    labels = [
        {name: y[s] for name, s in part.items()},
        {name: control[s] for name, s in part.items()},
    ]
    return features, labels


def gym_batched(features, labels, classes: int, seeds: tuple[int, ...]) -> tuple[float, list]:
    from evaluations.probing import probes

    started = time.perf_counter()
    fits = probes.fit_logreg_batched(
        [probes.Layer(f["tr"], f["va"], f["te"]) for f in features],
        [probes.Labels(y["tr"], y["va"], y["te"]) for y in labels],
        classes,
        seeds=seeds,
        grid=GRID,
    )
    seconds = time.perf_counter() - started
    return seconds, [[[fit.te_accuracy for fit in by_seed] for by_seed in layer] for layer in fits]


def sklearn_layer_by_layer(features, labels) -> tuple[float, list]:
    from sklearn.linear_model import LogisticRegression

    started = time.perf_counter()
    found = []
    for f in features:
        mean, std = f["tr"].mean(0), f["tr"].std(0)
        std = np.where(std > 1e-6, std, 1.0)
        x = {name: (v - mean) / std for name, v in f.items()}
        per_layer = []
        for y in labels:
            best = None
            for l2 in GRID:
                model = LogisticRegression(
                    C=1.0 / (l2 * len(y["tr"])), solver="lbfgs", max_iter=100
                )
                model.fit(x["tr"], y["tr"])
                va = float((model.predict(x["va"]) == y["va"]).mean())
                if best is None or va > best[0]:
                    best = (va, float((model.predict(x["te"]) == y["te"]).mean()))
            per_layer.append(best[1])
        found.append(per_layer)
    return time.perf_counter() - started, found


def mdl_side_by_side(features, labels, classes: int, layers: int) -> dict[str, object]:
    """The online code (MDL) of the task's probe on the first `layers` layers: every
    block of every layer in one batch, against block by block (`online_codelength`, a
    fit per block and layer), with the same penalty (0.01) on each layer."""
    from evaluations.probing import probes

    chosen = features[:layers]
    penalties = [0.01] * len(chosen)
    y = labels[0]
    started = time.perf_counter()
    batched = probes.online_codelength_batched(
        [f["tr"] for f in chosen], y["tr"], classes, penalties
    )
    batched_seconds = time.perf_counter() - started
    started = time.perf_counter()
    alone = [
        probes.online_codelength(
            probes.Split(f["tr"], y["tr"], f["va"], y["va"], f["te"], y["te"], classes),
            hyperparameter=penalties[k],
        )
        for k, f in enumerate(chosen)
    ]
    alone_seconds = time.perf_counter() - started
    return {
        "mdl_layers": len(chosen),
        "mdl_blocks": batched[0]["blocks"],
        "mdl_batched_seconds": round(batched_seconds, 2),
        "mdl_block_by_block_seconds": round(alone_seconds, 2),
        "mdl_speedup": round(alone_seconds / batched_seconds, 2),
        "mdl_bits_batched": [round(code["bits"], 1) for code in batched],
        "mdl_bits_block_by_block": [round(code["bits"], 1) for code in alone],
        "mdl_largest_relative_difference": round(
            max(
                abs(a["bits"] - b["bits"]) / a["bits"] for a, b in zip(alone, batched, strict=True)
            ),
            5,
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true")
    parser.add_argument("--train", type=int, default=20_000, help="tr sentences (va, te: a tenth)")
    parser.add_argument("--layers", type=int, default=13)
    parser.add_argument("--width", type=int, default=768)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--skip-sklearn", action="store_true")
    parser.add_argument(
        "--mdl-layers",
        type=int,
        default=0,
        help="also time the online code (MDL) of this many layers, batched and block by block",
    )
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    train, layers, width = (500, 3, 32) if args.smoke else (args.train, args.layers, args.width)
    n = {"tr": train, "va": max(1, train // 10), "te": max(1, train // 10)}
    classes, seeds = 4, (0, 1, 2)
    features, labels = synthetic(n, layers, width, classes)
    result: dict[str, object] = {"sentences": n, "layers": layers, "width": width, "seeds": 3}
    gym_seconds, gym_te = gym_batched(features, labels, classes, seeds)
    result["gym_batched_seconds"] = round(gym_seconds, 2)
    print(f"Gym batched: {gym_seconds:.1f} s for {layers * 2 * 3 * len(GRID)} fits", flush=True)
    if not args.skip_sklearn:
        sk_seconds, sk_te = sklearn_layer_by_layer(features, labels)
        result["sklearn_seconds"] = round(sk_seconds, 2)
        # scikit-learn's lbfgs ignores random_state: its three seeds are one fit three
        # times. Both ratios: against the fits it makes once (104 at 13 layers) and
        # against the same number of fits as Gym's (each of those three times).
        result["speedup"] = round(sk_seconds / gym_seconds, 2)
        result["speedup_same_fits"] = round(len(seeds) * sk_seconds / gym_seconds, 2)
        differences = [
            abs(np.mean(gym_te[k][s]) - sk_te[k][s]) for k in range(layers) for s in range(2)
        ]
        result["max_te_difference_points"] = round(100 * max(differences), 3)
        result["te_task_by_layer"] = {
            "gym": [round(float(np.mean(gym_te[k][0])), 4) for k in range(layers)],
            "sklearn": [round(sk_te[k][0], 4) for k in range(layers)],
        }
    mdl_layers = 2 if args.smoke else args.mdl_layers
    if mdl_layers:
        result.update(mdl_side_by_side(features, labels, classes, mdl_layers))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
