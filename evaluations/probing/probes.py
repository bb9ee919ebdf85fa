"""Classifiers trained on one layer's sentence vectors, and the trivial baselines.

Every hyperparameter is chosen on `va` and only then is `te` looked at. Features are
standardised with the training partition's mean and spread, so one L2 grid suits
every model and layer.

- logreg: multinomial logistic regression, full-batch L-BFGS, loss = mean cross-entropy
  + l2/2 * |W|^2, for each l2 of the grid (strongest first, each fit starting from the
  previous one's weights).
- mlp: one hidden layer of 50 sigmoid units with dropout 0.1 (SentEval's probing MLP),
  Adam, mini-batches, early stopping on `va` (3 rounds without gain; a round is one
  pass over tr, or several when tr is small), weight decay chosen from a grid.

Seeds are fixed: on a CPU the same inputs give the same numbers, run after run. A run
trains k probes per layer with the seeds `seeds_of(k)` (the first is SEED, the single
probe of before): for logreg the seed sets the starting weights, for the MLP also the
dropout masks and batch order.

`online_codelength` is the online code of Voita and Titov (2020): the bits that tr's
labels cost when each block is encoded by a probe trained on the blocks before it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from evaluations.probing.controls import SEED

PROBES = ("logreg", "mlp")
LOGREG_GRID = (1e-1, 1e-2, 1e-3, 1e-4)
MLP_GRID = (1e-2, 1e-3, 1e-4)
MLP_HIDDEN = 50
MLP_DROPOUT = 0.1
MLP_BATCH = 128
MLP_MAX_EPOCHS = 30
MLP_PATIENCE = 3
# Steps between two looks at va: a small training set still gets real training per round.
MLP_MIN_STEPS = 100


@dataclass
class Split:
    """Vectors and class indices of the three partitions (numpy, float32 / int64)."""

    x_tr: np.ndarray
    y_tr: np.ndarray
    x_va: np.ndarray
    y_va: np.ndarray
    x_te: np.ndarray
    y_te: np.ndarray
    n_classes: int


@dataclass
class ProbeFit:
    va_accuracy: float
    te_accuracy: float
    hyperparameters: dict[str, float | int]
    te_predictions: np.ndarray  # class index per te instance
    # log2 probability of each te instance's gold class (only when asked for: MDL)
    te_log2_gold: np.ndarray | None = None


def accuracy(predicted: np.ndarray, gold: np.ndarray) -> float:
    return float((predicted == gold).mean()) if len(gold) else 0.0


def confusion_matrix(gold: np.ndarray, predicted: np.ndarray, n_classes: int) -> list[list[int]]:
    """Rows: true class; columns: predicted class."""
    matrix = np.zeros((n_classes, n_classes), dtype=np.int64)
    np.add.at(matrix, (gold, predicted), 1)
    return matrix.tolist()


def _tensors(split: Split, device: str) -> tuple[torch.Tensor, ...]:
    x_tr = torch.as_tensor(split.x_tr, dtype=torch.float32)
    mean = x_tr.mean(0)
    std = x_tr.std(0, unbiased=False)
    # Constant dimensions (some layers have them) must not divide by zero.
    std = torch.where(std > 1e-6, std, torch.ones_like(std))

    def prepared(x: np.ndarray) -> torch.Tensor:
        return ((torch.as_tensor(x, dtype=torch.float32) - mean) / std).to(device)

    return (
        prepared(split.x_tr),
        torch.as_tensor(split.y_tr, dtype=torch.long, device=device),
        prepared(split.x_va),
        prepared(split.x_te),
    )


def _log2_gold(logits: torch.Tensor, gold: np.ndarray) -> np.ndarray:
    """log2 of the probability each row gives its gold class."""
    log_p = torch.log_softmax(logits.double(), dim=1).cpu().numpy()
    return log_p[np.arange(len(gold)), gold] / np.log(2.0)


def fit_logreg(
    split: Split,
    *,
    grid: Sequence[float] = LOGREG_GRID,
    device: str = "cpu",
    max_iter: int = 100,
    seed: int = SEED,
    log_probs: bool = False,
) -> ProbeFit:
    """The first seed (SEED) starts from zero weights; any other seed from small random
    weights drawn with it. The loss is convex, so seeds differ only as far as L-BFGS
    stops short of the optimum."""
    x_tr, y_tr, x_va, x_te = _tensors(split, device)
    start = _start_weights(x_tr.shape[1], split.n_classes, (seed,))
    weight = start.to(device).requires_grad_(True)
    bias = torch.zeros(split.n_classes, device=device, requires_grad=True)
    best: ProbeFit | None = None
    for l2 in sorted(grid, reverse=True):
        optimizer = _lbfgs([weight, bias], max_iter)

        def closure(l2: float = l2, optimizer: torch.optim.LBFGS = optimizer) -> torch.Tensor:
            optimizer.zero_grad()
            logits = x_tr @ weight + bias
            loss = torch.nn.functional.cross_entropy(logits, y_tr)
            loss = loss + 0.5 * l2 * weight.pow(2).sum()
            loss.backward()
            return loss

        optimizer.step(closure)
        with torch.no_grad():
            va_pred = (x_va @ weight + bias).argmax(1).cpu().numpy()
            va_accuracy = accuracy(va_pred, split.y_va)
            # Strictly better only: on a tie the stronger penalty (seen first) stays.
            if best is None or va_accuracy > best.va_accuracy:
                te_logits = x_te @ weight + bias
                te_pred = te_logits.argmax(1).cpu().numpy()
                best = ProbeFit(va_accuracy, accuracy(te_pred, split.y_te), {"l2": l2}, te_pred)
                if log_probs:
                    best.te_log2_gold = _log2_gold(te_logits, split.y_te)
    assert best is not None, "the grid is empty"
    return best


def _lbfgs(params: list[torch.Tensor], max_iter: int) -> torch.optim.LBFGS:
    """The L-BFGS of the logistic-regression probes, alone or in a batch."""
    return torch.optim.LBFGS(
        params,
        lr=1.0,
        max_iter=max_iter,
        history_size=10,
        tolerance_grad=1e-6,
        tolerance_change=1e-9,
        line_search_fn="strong_wolfe",
    )


class _MLP(torch.nn.Module):
    def __init__(self, width: int, n_classes: int) -> None:
        super().__init__()
        self.hidden = torch.nn.Linear(width, MLP_HIDDEN)
        self.dropout = torch.nn.Dropout(MLP_DROPOUT)
        self.out = torch.nn.Linear(MLP_HIDDEN, n_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.sigmoid(self.dropout(self.hidden(x))))


def fit_mlp(
    split: Split,
    *,
    grid: Sequence[float] = MLP_GRID,
    device: str = "cpu",
    max_epochs: int = MLP_MAX_EPOCHS,
    seed: int = SEED,
    log_probs: bool = False,
) -> ProbeFit:
    x_tr, y_tr, x_va, x_te = _tensors(split, device)
    best: ProbeFit | None = None
    for decay in grid:
        # Each fit draws its initial weights, dropout masks and batch order from its own
        # seeded generators, so the grid's order does not change any fit.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = _MLP(x_tr.shape[1], split.n_classes).to(device)
            shuffle = torch.Generator().manual_seed(seed)
            optimizer = torch.optim.Adam(model.parameters(), lr=1e-3, weight_decay=decay)
            state: dict[str, torch.Tensor] | None = None
            best_va, epoch_va, stale = -1.0, -1.0, 0
            n = x_tr.shape[0]
            per_pass = -(-n // MLP_BATCH)
            passes = max(1, -(-MLP_MIN_STEPS // per_pass))
            for _round in range(max_epochs):
                model.train()
                for _pass in range(passes):
                    order = torch.randperm(n, generator=shuffle).to(device)
                    for start in range(0, n, MLP_BATCH):
                        rows = order[start : start + MLP_BATCH]
                        optimizer.zero_grad()
                        loss = torch.nn.functional.cross_entropy(model(x_tr[rows]), y_tr[rows])
                        loss.backward()
                        optimizer.step()
                model.eval()
                with torch.no_grad():
                    epoch_va = accuracy(model(x_va).argmax(1).cpu().numpy(), split.y_va)
                if epoch_va > best_va:
                    best_va, stale = epoch_va, 0
                    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
                else:
                    stale += 1
                    if stale >= MLP_PATIENCE:
                        break
            assert state is not None
            model.load_state_dict(state)
            model.eval()
        if best is None or best_va > best.va_accuracy:
            with torch.no_grad():
                te_logits = model(x_te)
            te_pred = te_logits.argmax(1).cpu().numpy()
            best = ProbeFit(
                best_va,
                accuracy(te_pred, split.y_te),
                {"weight_decay": decay, "hidden": MLP_HIDDEN},
                te_pred,
            )
            if log_probs:
                best.te_log2_gold = _log2_gold(te_logits, split.y_te)
    assert best is not None, "the grid is empty"
    return best


def fit_probe(
    split: Split,
    *,
    probe: str = "logreg",
    device: str = "cpu",
    seed: int = SEED,
    grid: Sequence[float] | None = None,
    log_probs: bool = False,
) -> ProbeFit:
    if probe == "logreg":
        return fit_logreg(
            split, device=device, seed=seed, grid=grid or LOGREG_GRID, log_probs=log_probs
        )
    if probe == "mlp":
        return fit_mlp(split, device=device, seed=seed, grid=grid or MLP_GRID, log_probs=log_probs)
    raise ValueError(f"probe must be one of {', '.join(PROBES)}, not '{probe}'")


# Online code (Voita and Titov 2020): tr is sent in blocks that end at these shares of it.
MDL_FRACTIONS = (0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.0625, 0.125, 0.25, 0.5, 1.0)


def mdl_blocks(n: int) -> list[int]:
    """Where the blocks end: at least one instance in the first, none empty."""
    return sorted({min(n, max(1, round(f * n))) for f in MDL_FRACTIONS})


def online_codelength(
    split: Split,
    *,
    probe: str = "logreg",
    hyperparameter: float | None = None,
    device: str = "cpu",
    seed: int = SEED,
) -> dict[str, float | None]:
    """The description length of tr's labels given its vectors, in bits.

    tr is shuffled with `seed`; the first block is sent with the uniform code
    (log2 K bits each), then each next block is encoded with the probe trained on all
    the blocks before it (hyperparameter fixed, the va partition used only for an MLP's
    early stopping). Uniform: log2 K bits for every instance; compression = uniform / MDL.
    """
    n = len(split.y_tr)
    order = np.random.default_rng(seed).permutation(n)
    x, y = split.x_tr[order], split.y_tr[order]
    uniform_per = float(np.log2(split.n_classes))
    ends = mdl_blocks(n)
    bits = ends[0] * uniform_per
    grid = None if hyperparameter is None else (hyperparameter,)
    for start, end in zip(ends, ends[1:], strict=False):
        block = Split(
            x_tr=x[:start],
            y_tr=y[:start],
            x_va=split.x_va,
            y_va=split.y_va,
            x_te=x[start:end],
            y_te=y[start:end],
            n_classes=split.n_classes,
        )
        fit = fit_probe(block, probe=probe, device=device, seed=seed, grid=grid, log_probs=True)
        assert fit.te_log2_gold is not None
        bits -= float(fit.te_log2_gold.sum())
    uniform = n * uniform_per
    return {
        "bits": bits,
        "uniform_bits": uniform,
        "compression": uniform / bits if bits > 0 else None,
        "blocks": len(ends),
    }


# Baselines need no vectors: they read the labels, and the sentences' lengths.


def majority_baseline(
    y_tr: np.ndarray, y_va: np.ndarray, y_te: np.ndarray
) -> tuple[int, float, float]:
    """(class, va accuracy, te accuracy) of always answering tr's most frequent class;
    a tie goes to the lower class index (label order)."""
    counts = np.bincount(y_tr)
    majority = int(counts.argmax())
    return majority, float((y_va == majority).mean()), float((y_te == majority).mean())


def length_baseline(
    len_tr: Sequence[int],
    y_tr: np.ndarray,
    len_va: Sequence[int],
    y_va: np.ndarray,
    len_te: Sequence[int],
    y_te: np.ndarray,
) -> tuple[float, float]:
    """(va, te) accuracy of a classifier that sees only the number of words.

    For each length seen in tr it answers tr's most frequent class at that length (a
    tie goes to the class more frequent overall, then the lower index); a length never
    seen in tr borrows the nearest seen length (the shorter one on a tie). This is the
    best any classifier on length alone can do on tr.
    """
    overall = np.bincount(y_tr)
    by_length: dict[int, Counter[int]] = {}
    for length, label in zip(len_tr, y_tr, strict=True):
        by_length.setdefault(int(length), Counter())[int(label)] += 1
    answer = {
        length: max(counter, key=lambda c: (counter[c], overall[c], -c))
        for length, counter in by_length.items()
    }
    known = np.array(sorted(answer))

    def predict(length: int) -> int:
        if length in answer:
            return answer[length]
        nearest = known[np.argmin(np.abs(known - length) * 2 + (known > length))]
        return answer[int(nearest)]

    def score(lengths: Sequence[int], gold: np.ndarray) -> float:
        predicted = np.array([predict(int(n)) for n in lengths], dtype=np.int64)
        return accuracy(predicted, gold)

    return score(len_va, y_va), score(len_te, y_te)


# Batched logistic regression: the probes of several layers, label sets (the task's and
# a control's) and seeds at once.

# Bytes of features a batch of layers may hold on its device (standardised copies of tr,
# va and te); more layers than fit are fitted in several batches.
BATCH_FEATURE_BYTES = 2 * 1024**3


@dataclass
class Layer:
    """One layer's vectors of the three partitions (numpy float32)."""

    x_tr: np.ndarray
    x_va: np.ndarray
    x_te: np.ndarray


@dataclass
class Labels:
    """One label set of the three partitions (the task's, or a control task's)."""

    y_tr: np.ndarray
    y_va: np.ndarray
    y_te: np.ndarray


def fit_logreg_batched(
    layers: Sequence[Layer],
    label_sets: Sequence[Labels],
    n_classes: int,
    *,
    seeds: Sequence[int] = (SEED,),
    grid: Sequence[float] = LOGREG_GRID,
    device: str = "cpu",
    max_iter: int = 100,
    batch_bytes: int = BATCH_FEATURE_BYTES,
) -> list[list[list[ProbeFit]]]:
    """`fit_logreg` for every (layer, label set, seed), as one problem per batch of
    layers: fits[layer][label set][seed]. The same loss, starting weights, grid (strongest
    first, each l2 starting from the previous one's weights) and choice on va (strictly
    better only) as `fit_logreg`; the losses of all the probes are summed, so the
    gradient of each probe's weights is its own loss's, and one L-BFGS (`max_iter`
    iterations per l2, as `fit_logreg`'s) runs on them all: each layer's features are
    multiplied once per evaluation for all its probes, instead of once per probe. The
    optimum of each probe is the same convex optimum; where L-BFGS stops short of it
    differs, so accuracies agree with `fit_logreg`'s within its own seed-to-seed noise."""
    if not layers:
        return []
    n = max(1, len(layers[0].x_tr) + len(layers[0].x_va) + len(layers[0].x_te))
    per_layer = 4 * n * layers[0].x_tr.shape[1]
    step = max(1, min(len(layers), batch_bytes // max(per_layer, 1)))
    fits: list[list[list[ProbeFit]]] = []
    for start in range(0, len(layers), step):
        fits += _fit_batch(
            layers[start : start + step], label_sets, n_classes, seeds, grid, device, max_iter
        )
    return fits


def _standardised(layers: Sequence[Layer], device: str) -> tuple[torch.Tensor, ...]:
    """(L, n, d) tensors of tr, va and te, each layer standardised as `_tensors` does."""
    prepared = [
        _tensors(
            Split(
                b.x_tr, np.zeros(len(b.x_tr), np.int64), b.x_va, np.zeros(0), b.x_te, np.zeros(0), 1
            ),
            device,
        )  # fmt: skip
        for b in layers
    ]
    return tuple(torch.stack([p[i] for p in prepared]) for i in (0, 2, 3))


def _start_weights(width: int, n_classes: int, seeds: Sequence[int]) -> torch.Tensor:
    """(width, seeds * classes): each seed's starting weights, as `fit_logreg` draws them."""
    columns = []
    for seed in seeds:
        start = torch.zeros((width, n_classes))
        if seed != SEED:
            start = 0.01 * torch.randn(
                (width, n_classes), generator=torch.Generator().manual_seed(seed)
            )
        columns.append(start)
    return torch.cat(columns, dim=1)


def _fit_batch(
    layers: Sequence[Layer],
    label_sets: Sequence[Labels],
    n_classes: int,
    seeds: Sequence[int],
    grid: Sequence[float],
    device: str,
    max_iter: int,
) -> list[list[list[ProbeFit]]]:
    x_tr, x_va, x_te = _standardised(layers, device)
    n_layers, _, width = x_tr.shape
    probes = len(label_sets) * len(seeds)  # per layer, label set major
    start = _start_weights(width, n_classes, seeds).repeat(1, len(label_sets))
    weight = start.expand(n_layers, -1, -1).clone().to(device).requires_grad_(True)
    bias = torch.zeros((n_layers, 1, probes * n_classes), device=device, requires_grad=True)
    # Targets (probes, n_tr): each label set's, once per seed.
    targets = torch.stack(
        [
            torch.as_tensor(labels.y_tr, dtype=torch.long) for labels in label_sets for _ in seeds
        ]  # fmt: skip
    ).to(device)
    best: list[list[ProbeFit | None]] = [[None] * probes for _ in range(n_layers)]
    for l2 in sorted(grid, reverse=True):
        optimizer = _lbfgs([weight, bias], max_iter)

        def closure(l2: float = l2, optimizer: torch.optim.LBFGS = optimizer) -> torch.Tensor:
            optimizer.zero_grad()
            logits = (torch.bmm(x_tr, weight) + bias).view(n_layers, -1, probes, n_classes)
            # (layers, classes, n, probes) against (layers, n, probes) targets.
            loss = (
                torch.nn.functional.cross_entropy(
                    logits.permute(0, 3, 1, 2),
                    targets.t().expand(n_layers, -1, -1),
                    reduction="none",
                )
                .mean(dim=1)
                .sum()
            )
            loss = loss + 0.5 * l2 * weight.pow(2).sum()
            loss.backward()
            return loss

        optimizer.step(closure)
        _choose(best, x_va, x_te, weight, bias, label_sets, seeds, n_classes, l2)
    return [
        [[best[k][s * len(seeds) + i] for i in range(len(seeds))]  # type: ignore[misc]
         for s in range(len(label_sets))]
        for k in range(n_layers)
    ]  # fmt: skip


def _choose(
    best: list[list[ProbeFit | None]],
    x_va: torch.Tensor,
    x_te: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor,
    label_sets: Sequence[Labels],
    seeds: Sequence[int],
    n_classes: int,
    l2: float,
) -> None:
    """Keep, for each probe, this l2's fit when its va accuracy is strictly better."""
    n_layers = x_va.shape[0]
    probes = len(label_sets) * len(seeds)
    with torch.no_grad():
        va = (torch.bmm(x_va, weight) + bias).view(n_layers, -1, probes, n_classes).argmax(3)
        te = (torch.bmm(x_te, weight) + bias).view(n_layers, -1, probes, n_classes).argmax(3)
    va_pred, te_pred = va.cpu().numpy(), te.cpu().numpy()
    for k in range(n_layers):
        for p in range(probes):
            labels = label_sets[p // len(seeds)]
            va_accuracy = accuracy(va_pred[k, :, p], labels.y_va)
            if best[k][p] is None or va_accuracy > best[k][p].va_accuracy:  # type: ignore[union-attr]
                predicted = te_pred[k, :, p]
                best[k][p] = ProbeFit(
                    va_accuracy, accuracy(predicted, labels.y_te), {"l2": l2}, predicted
                )
