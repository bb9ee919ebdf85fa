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
from typing import Any

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
    mean = torch.as_tensor(split.x_tr.mean(0, dtype=np.float64))
    std = torch.as_tensor(split.x_tr.std(0, dtype=np.float64))
    # Constant dimensions (some layers have them) must not divide by zero.
    scale = _scale(std).float()
    mean = mean.float()

    def prepared(x: np.ndarray) -> torch.Tensor:
        # One copy, standardised in place (the features can be gigabytes).
        out = torch.tensor(x, dtype=torch.float32, device=device)
        return out.sub_(mean.to(device)).mul_(scale.to(device))

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
) -> dict[str, Any]:
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
    block_bits = [ends[0] * uniform_per]
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
        block_bits.append(-float(fit.te_log2_gold.sum()))
    return _online_code(block_bits, n * uniform_per)


def _online_code(block_bits: list[float], uniform: float) -> dict[str, Any]:
    """The online code's entry of a layer from each block's bits (the first the uniform
    code's) and the uniform code of all of tr."""
    bits = float(sum(block_bits))
    return {
        "bits": bits,
        "uniform_bits": uniform,
        "compression": uniform / bits if bits > 0 else None,
        "blocks": len(block_bits),
        "block_bits": block_bits,
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
# a control's) and seeds at once, each probe with its own L-BFGS state.

# Bytes a batch of layers may hold on its device (standardised copies of tr, va and te,
# and the probes' L-BFGS state); more layers than fit are fitted in several batches.
BATCH_FEATURE_BYTES = 2 * 1024**3
# Stop a probe's fit at this largest gradient component (scikit-learn's lbfgs `tol`).
BATCHED_TOL = 1e-4
# L-BFGS pairs kept per probe.
HISTORY = 10
# Rows the preconditioner's Gram matrix is estimated from.
GRAM_ROWS = 16_384
# Böhning's bound on the curvature of the multinomial log-loss: 1/2 (I - 11'/K) <= 1/2.
BOHNING = 0.5
# Bytes of logits one matrix product may make; more rows are taken in several.
LOGIT_BYTES = 256 * 1024**2
# The online code's probes stop at this largest gradient component: a block is small
# and its probe weakly penalised, so its optimum is slow to reach, and the bits of the
# next block are read off it (the block-by-block fit's L-BFGS stops at the same).
MDL_TOL = 1e-6


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
    tol: float = BATCHED_TOL,
    batch_bytes: int = BATCH_FEATURE_BYTES,
) -> list[list[list[ProbeFit]]]:
    """`fit_logreg` for every (layer, label set, seed): fits[layer][label set][seed].

    The same loss (mean cross-entropy + l2/2 |W|^2 on features standardised with tr's
    mean and spread), starting weights, grid (strongest first, each l2 starting from the
    previous one's weights) and choice on va (strictly better only) as `fit_logreg`. All
    the probes of a batch of layers are one problem for `_solve`: one matrix product per
    layer and step serves every probe of that layer, while each probe keeps its own
    L-BFGS history, step and stopping point (largest gradient component under `tol`, as
    scikit-learn's lbfgs, or `max_iter` iterations per l2). The optimum of each probe is
    the same convex optimum as a lone fit's, so accuracies agree with `fit_logreg`'s
    within its own seed-to-seed noise."""
    if not layers:
        return []
    width = layers[0].x_tr.shape[1]
    n = max(1, len(layers[0].x_tr) + len(layers[0].x_va) + len(layers[0].x_te))
    probes = len(label_sets) * len(seeds)
    state = (2 * HISTORY + 6) * (width + 1) * probes * n_classes
    per_layer = 4 * (n * width + state + width * width)
    step = max(1, min(len(layers), batch_bytes // max(per_layer, 1)))
    fits: list[list[list[ProbeFit]]] = []
    for start in range(0, len(layers), step):
        fits += _fit_batch(
            layers[start : start + step], label_sets, n_classes, seeds, grid, device, max_iter, tol
        )
    return fits


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
    tol: float,
) -> list[list[list[ProbeFit]]]:
    prepared = [
        _tensors(Split(b.x_tr, np.zeros(0), b.x_va, np.zeros(0), b.x_te, np.zeros(0), 1), device)
        for b in layers
    ]
    x_tr = [p[0] for p in prepared]
    x_va = [p[2] for p in prepared]
    x_te = [p[3] for p in prepared]
    width = x_tr[0].shape[1]
    probes = len(label_sets) * len(seeds)  # per layer, label set major
    start = _start_weights(width, n_classes, seeds).view(width, len(seeds), n_classes)
    theta = torch.zeros((len(layers), width + 1, probes, n_classes))
    theta[:, :width] = start.repeat(1, len(label_sets), 1)
    theta = theta.to(device)
    targets = torch.stack(
        [torch.as_tensor(labels.y_tr, dtype=torch.long) for labels in label_sets for _ in seeds]
    ).to(device)
    solver = _Solver(x_tr, targets, n_classes, history=HISTORY)
    best: list[list[ProbeFit | None]] = [[None] * probes for _ in layers]
    for l2 in sorted(grid, reverse=True):
        theta = solver.solve(theta, torch.full((len(layers), probes), l2), max_iter, tol)
        for k in range(len(layers)):
            va = _predict(x_va[k], theta[k]).cpu().numpy()
            te = _predict(x_te[k], theta[k]).cpu().numpy()
            for p in range(probes):
                labels = label_sets[p // len(seeds)]
                va_accuracy = accuracy(va[:, p], labels.y_va)
                found = best[k][p]
                # Strictly better only: on a tie the stronger penalty (seen first) stays.
                if found is None or va_accuracy > found.va_accuracy:
                    best[k][p] = ProbeFit(
                        va_accuracy, accuracy(te[:, p], labels.y_te), {"l2": l2}, te[:, p]
                    )
    return [
        [[best[k][s * len(seeds) + i] for i in range(len(seeds))]  # type: ignore[misc]
         for s in range(len(label_sets))]
        for k in range(len(layers))
    ]  # fmt: skip


def _logits(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    """(n, probes, classes) logits of rows x (n, d) under weights theta (d + 1, probes,
    classes), the last row of theta being the biases."""
    width, probes, classes = theta.shape[0] - 1, theta.shape[1], theta.shape[2]
    weight = theta[:width].reshape(width, probes * classes)
    bias = theta[width].reshape(probes * classes)
    return torch.addmm(bias, x, weight).view(len(x), probes, classes)


def _predict(x: torch.Tensor, theta: torch.Tensor) -> torch.Tensor:
    return _logits(x, theta).argmax(2)


def _dot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Each probe's inner product of two (layers, d + 1, probes, classes) tensors."""
    return (a * b).sum(dim=(1, 3))


def _per(values: torch.Tensor) -> torch.Tensor:
    """(layers, probes) values broadcast over (layers, d + 1, probes, classes)."""
    return values[:, None, :, None]


class _Solver:
    """L-BFGS for a batch of independent multinomial logistic regressions.

    Problem (k, p) is layer k's rows `xs[k]` (n, d) with targets `targets[p]` and
    penalty l2[k, p] (one per layer); its weights are theta[k, :, p, :] ((d + 1) x classes, the last row
    the biases, unpenalised). Each problem has its own L-BFGS pairs, line search
    (backtracking to the Armijo condition) and stop; a step evaluates, layer by layer,
    the problems still running with one product of the layer's rows for all of them.

    The first step and every two-loop recursion start from Böhning's bound on the
    Hessian, (c XᵀX / n + l2 I) with c = 1/2, inverted from the layer's Gram matrix
    (estimated on GRAM_ROWS rows; one Cholesky inverse per layer and penalty): correlated
    features, as the layers of language models have, then cost few more iterations than
    independent ones.
    When l2 changes (the grid's path), each pair's gradient difference is corrected by
    the change of penalty, which is exact, so the history carries over.
    """

    def __init__(
        self,
        xs: Sequence[torch.Tensor],
        targets: torch.Tensor,
        n_classes: int,
        history: int,
        *,
        counts: torch.Tensor | None = None,
        scales: torch.Tensor | None = None,
    ) -> None:
        self.xs = xs
        self.targets = targets
        self.n_classes = n_classes
        self.history = history
        # Problem p uses only the first counts[p] rows (the online code's blocks); None:
        # every problem all of them.
        self.counts = counts
        # Each weight's penalty is l2 times scales[k, j, p] (layers, width, probes): the
        # online code's blocks, each standardised on its own rows; None: 1.
        self.scales = scales
        # Böhning's bound needs each problem's own rows: one Gram matrix per layer, or
        # per layer and problem when problems count different rows. Those rows' mean is
        # not 0 (standardised with all of tr's), so the bound takes in the biases too:
        # (probes, d + 1, d + 1), of the rows with a column of ones.
        self.grams = [
            self._gram(x)
            if counts is None
            else torch.stack([self._gram(_with_ones(x[: int(c)]), GRAM_ROWS // 4) for c in counts])
            for x in xs
        ]
        self.inverses: list[torch.Tensor] = []
        self.pairs: tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None = None
        self.l2: torch.Tensor | None = None
        self.evaluations = 0

    @staticmethod
    def _gram(x: torch.Tensor, most: int = GRAM_ROWS) -> torch.Tensor:
        stride = max(1, len(x) // most)
        rows = x[::stride]
        return rows.t() @ rows / max(1, len(rows))

    def _invert(self, l2: torch.Tensor) -> None:
        """(c G + l2 I)^-1 for each layer (one penalty for all of a layer's problems)."""
        self.inverses = []
        for k, gram in enumerate(self.grams):
            values = set(l2[k].tolist())
            assert len(values) == 1, "one penalty per layer"
            penalty = values.pop()
            if self.scales is None:
                eye = torch.eye(gram.shape[-1], dtype=torch.float64, device=gram.device)
                bound = BOHNING * gram.double() + penalty * eye
            else:  # one bound per problem and its bias: (probes, d + 1, d + 1)
                weights = penalty * self.scales[k].t().double()  # (probes, d)
                diagonal = torch.diag_embed(torch.nn.functional.pad(weights, (0, 1)))
                bound = BOHNING * gram.double() + diagonal.to(gram.device)
                # A block of a few rows leaves the bound nearly singular (the bias is not
                # penalised): a small ridge keeps it a preconditioner Cholesky can take.
                ridge = 1e-6 * bound.diagonal(dim1=1, dim2=2).mean(1).clamp_min(1e-12)
                bound += ridge[:, None, None] * torch.eye(
                    bound.shape[-1], dtype=bound.dtype, device=bound.device
                )
            self.inverses.append(torch.cholesky_inverse(torch.linalg.cholesky(bound)).float())

    def loss_grad(
        self, theta: torch.Tensor, l2: torch.Tensor, running: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Each problem's loss (layers, probes; float64) and gradient (as theta), for the
        problems `running` (layers, probes) only: the others get 0."""
        n_layers, d1, probes, classes = theta.shape
        width = d1 - 1
        loss = torch.zeros((n_layers, probes), dtype=torch.float64, device=theta.device)
        grad = torch.zeros_like(theta)
        self.evaluations += 1
        for k in range(n_layers):
            ps = running[k].nonzero().flatten()
            if len(ps) == 0:
                continue
            x = self.xs[k]
            sub = theta[k][:, ps]  # (d + 1, a, classes)
            a = len(ps)
            y = self.targets[ps.to(self.targets.device)].t()  # (n, a)
            counts = None if self.counts is None else self.counts[ps.cpu()].to(theta.device)
            n = len(x) if counts is None else int(counts.max())
            total = torch.zeros(a, dtype=torch.float64, device=theta.device)
            gsub = torch.zeros_like(sub)
            rows = max(1, LOGIT_BYTES // (4 * a * classes))
            for first in range(0, n, rows):
                xr = x[first : min(n, first + rows)]
                yr = y[first : first + len(xr), :, None]
                # The softmax over a few classes by hand: log_softmax's kernel is slow
                # on so short a last dimension (about 2x on a CPU).
                z = _logits(xr, sub)
                z -= z.amax(2, keepdim=True)
                g = z.exp()
                norm = g.sum(2, keepdim=True)
                losses = (norm.log() - z.gather(2, yr)).squeeze(2)
                g /= norm
                g.scatter_add_(2, yr, torch.full(yr.shape, -1.0, device=g.device))
                if counts is not None:  # the rows past a problem's count are not its
                    index = torch.arange(first, first + len(xr), device=theta.device)
                    inside = (index[:, None] < counts[None, :]).float()
                    losses = losses * inside
                    g *= inside[:, :, None]
                total += losses.double().sum(0)
                # gᵀ x rather than xᵀ g: the same sums, with the long dimension where the
                # matrix kernels want it (about twice as fast on a CPU).
                gt = g.view(len(xr), a * classes).t().contiguous()
                gsub[:width] += (gt @ xr).t().reshape(width, a, classes)
                gsub[width] += g.sum(0)
            divisor = torch.full((a,), max(1, n)) if counts is None else counts.clamp_min(1)
            divisor = divisor.to(theta.device)
            gsub /= divisor[None, :, None]
            penalty = l2[k, ps.to(l2.device)].to(theta.device)[None, :]  # (1 or d, a)
            if self.scales is not None:
                penalty = penalty * self.scales[k][:, ps.cpu()].to(theta.device)
            gsub[:width] += penalty[:, :, None] * sub[:width]
            loss_sub = total / divisor.double()
            squares = sub[:width].double().pow(2).sum(dim=2)  # (d, a)
            loss_sub += 0.5 * (penalty.double() * squares).sum(dim=0)
            grad[k][:, ps] = gsub
            loss[k, ps] = loss_sub
        return loss, grad

    def precondition(self, q: torch.Tensor, l2: torch.Tensor) -> torch.Tensor:
        """Böhning's bound inverted, applied to q (as theta)."""
        width = q.shape[1] - 1
        out = torch.empty_like(q)
        for k, inverse in enumerate(self.inverses):
            if inverse.dim() == 3:  # one per problem, its bias included
                out[k] = torch.bmm(inverse, q[k].transpose(0, 1)).transpose(0, 1)
                continue
            flat = inverse @ q[k, :width].reshape(width, -1)
            out[k, :width] = flat.view(width, q.shape[2], q.shape[3])
            out[k, width] = q[k, width] / BOHNING
        return out

    def direction(self, g: torch.Tensor, l2: torch.Tensor, gamma: torch.Tensor) -> torch.Tensor:
        q = g.clone()
        if self.pairs is None:
            return -self.precondition(q, l2)
        s_hist, y_hist, rho = self.pairs
        alphas = []
        for i in range(len(rho) - 1, -1, -1):
            alpha = rho[i] * _dot(s_hist[i], q)
            q -= _per(alpha) * y_hist[i]
            alphas.append(alpha)
        r = self.precondition(q, l2) * _per(gamma)
        for i in range(len(rho)):
            beta = rho[i] * _dot(y_hist[i], r)
            r += _per(alphas[len(rho) - 1 - i] - beta) * s_hist[i]
        return -r

    def remember(self, s: torch.Tensor, y: torch.Tensor, moved: torch.Tensor) -> torch.Tensor:
        """Keep the pair (s, y) of the problems that `moved` with positive curvature; the
        scale of the next initial Hessian, per problem."""
        sy = _dot(s, y)
        keep = moved & (sy > 1e-12)
        rho = torch.where(keep, 1.0 / sy.clamp_min(1e-12), torch.zeros_like(sy))
        s = s * _per(keep)
        y = y * _per(keep)
        if self.pairs is None:
            self.pairs = (s[None], y[None], rho[None])
        else:
            s_hist, y_hist, rhos = self.pairs
            self.pairs = (
                torch.cat([s_hist, s[None]])[-self.history :],
                torch.cat([y_hist, y[None]])[-self.history :],
                torch.cat([rhos, rho[None]])[-self.history :],
            )
        return sy

    def retarget(self, theta: torch.Tensor, l2: torch.Tensor) -> None:
        """A new penalty: the kept pairs' gradient differences change by (new - old) s."""
        if self.pairs is None or self.l2 is None:
            self.l2 = l2
            return
        width = theta.shape[1] - 1
        s_hist, y_hist, _ = self.pairs
        delta = (l2 - self.l2).to(theta.device)[:, None, :]  # (layers, 1, probes)
        if self.scales is not None:
            delta = delta * self.scales.to(theta.device)
        y_hist = y_hist.clone()
        y_hist[:, :, :width] += delta[None, :, :, :, None] * s_hist[:, :, :width]
        sy = (s_hist * y_hist).sum(dim=(2, 4))
        keep = sy > 1e-12
        rho = torch.where(keep, 1.0 / sy.clamp_min(1e-12), torch.zeros_like(sy))
        self.pairs = (s_hist, y_hist, rho)
        self.l2 = l2

    def solve(
        self, theta: torch.Tensor, l2: torch.Tensor, max_iter: int, tol: float
    ) -> torch.Tensor:
        """Every problem from `theta` to its optimum with penalties l2 (layers, probes)."""
        l2 = l2.to(theta.device)
        self._invert(l2)
        self.retarget(theta, l2)
        everything = torch.ones(l2.shape, dtype=torch.bool, device=theta.device)
        loss, grad = self.loss_grad(theta, l2, everything)
        running = grad.abs().amax(dim=(1, 3)) > tol
        gamma = torch.ones(l2.shape, device=theta.device)
        for _ in range(max_iter):
            if not running.any():
                break
            d = self.direction(grad, l2, gamma) * _per(running)
            slope = _dot(grad, d).double()
            # Not a descent direction (a history gone stale): the preconditioned gradient.
            uphill = running & (slope >= 0)
            if uphill.any():
                d = torch.where(_per(uphill), -self.precondition(grad, l2), d)
                slope = _dot(grad, d).double()
            step = torch.ones(l2.shape, device=theta.device)
            new_theta = theta + _per(step) * d
            new_loss, new_grad = self.loss_grad(new_theta, l2, running)
            pending = running & (new_loss > loss + 1e-4 * step.double() * slope)
            for _halving in range(4):
                if not pending.any():
                    break
                step = torch.where(pending, step * 0.5, step)
                trial = theta + _per(step) * d
                trial_loss, trial_grad = self.loss_grad(trial, l2, pending)
                new_theta = torch.where(_per(pending), trial, new_theta)
                new_loss = torch.where(pending, trial_loss, new_loss)
                new_grad = torch.where(_per(pending), trial_grad, new_grad)
                pending = pending & (new_loss > loss + 1e-4 * step.double() * slope)
            # A problem whose line search found no decrease is as far as float32 goes.
            stalled = pending
            moved = running & ~stalled
            s = (new_theta - theta) * _per(moved)
            y = (new_grad - grad) * _per(moved)
            sy = self.remember(s, y, moved)
            yy = _dot(y, self.precondition(y, l2))
            gamma = torch.where(moved & (sy > 1e-12), sy / yy.clamp_min(1e-30), gamma)
            theta = torch.where(_per(moved), new_theta, theta)
            loss = torch.where(moved, new_loss, loss)
            grad = torch.where(_per(moved), new_grad, grad)
            running = moved & (grad.abs().amax(dim=(1, 3)) > tol)
        return theta


def online_codelength_batched(
    layers: Sequence[np.ndarray],
    y_tr: np.ndarray,
    n_classes: int,
    l2s: Sequence[float],
    *,
    seed: int = SEED,
    device: str = "cpu",
    max_iter: int = 300,
    tol: float = MDL_TOL,
) -> list[dict[str, Any]]:
    """`online_codelength` of the logistic-regression probe for each layer's tr vectors
    `layers[k]` with its penalty `l2s[k]`, every block of every layer one problem of one
    batch (`_Solver`). The same shuffle, blocks, start weights and loss as block by
    block: each block's probe is trained on the rows before it, standardised with those
    rows' own mean and spread. That standardisation is carried as each weight's penalty
    instead (l2 (s / s_b)² on features standardised once, s the whole tr's spread and
    s_b the block's, the same probe written in other units), so that one product of a
    layer's rows serves all its blocks; a block's problem counts only its own rows."""
    if not layers:
        return []
    n = len(y_tr)
    order = np.random.default_rng(seed).permutation(n)
    ends = mdl_blocks(n)
    starts = ends[:-1]
    uniform_per = float(np.log2(n_classes))
    width = layers[0].shape[1]
    xs, scales = [], []
    for x_tr in layers:
        x = torch.as_tensor(np.ascontiguousarray(x_tr[order]), dtype=torch.float32)
        # Each block's spread (its own standardisation, as fit_logreg's) from the sums
        # of the rows between two ends, in float64: one pass over the rows.
        total = torch.zeros(width, dtype=torch.float64)
        squares = torch.zeros(width, dtype=torch.float64)
        spreads = []
        for before, end in zip([0, *ends[:-1]], ends, strict=True):
            part = x[before:end].double()
            total += part.sum(0)
            squares += part.pow(2).sum(0)
            mean = total / end
            spreads.append((squares / end - mean.pow(2)).clamp_min(0).sqrt())
        scale = _scale(spreads[-1])
        rows = [(scale / _scale(spread)).pow(2) for spread in spreads[:-1]]
        xs.append(x.sub_(mean.float()).mul_(scale.float()).to(device))
        scales.append(torch.stack(rows, dim=1).float())  # (d, blocks)
    targets = torch.as_tensor(y_tr[order], dtype=torch.long)[None].repeat(len(starts), 1)
    counts = torch.as_tensor(starts, dtype=torch.long)
    solver = _Solver(
        xs,
        targets.to(device),
        n_classes,
        history=HISTORY,
        counts=counts,
        scales=torch.stack(scales).to(device),
    )
    start_weights = _start_weights(width, n_classes, (seed,)).view(width, 1, n_classes)
    theta = torch.zeros((len(layers), width + 1, len(starts), n_classes))
    # Each block's start (zero, or the seed's draw) in its own units, as block by block.
    theta[:, :width] = start_weights / torch.stack(scales)[:, :, :, None].sqrt()
    theta = theta.to(device)
    l2 = torch.tensor([[float(v)] * len(starts) for v in l2s])
    theta = solver.solve(theta, l2, max_iter, tol)
    y = torch.as_tensor(y_tr[order], dtype=torch.long)
    found = []
    for k, x in enumerate(xs):
        # Each block's bits: the first's by the uniform code, each next one's by the
        # probe trained on the blocks before it.
        block_bits = [ends[0] * uniform_per]
        for b, (start, end) in enumerate(zip(starts, ends[1:], strict=True)):
            logits = _logits(x[start:end], theta[k][:, b : b + 1])[:, 0].double()
            log_p = torch.log_softmax(logits, dim=1).cpu()
            gold = log_p[torch.arange(end - start), y[start:end]]
            block_bits.append(-float(gold.sum()) / np.log(2.0))
        found.append(_online_code(block_bits, n * uniform_per))
    return found


def _with_ones(x: torch.Tensor) -> torch.Tensor:
    return torch.cat([x, torch.ones((len(x), 1), dtype=x.dtype, device=x.device)], dim=1)


def _scale(std: torch.Tensor) -> torch.Tensor:
    """1 / spread, or 1 where a dimension is constant (as `_tensors`)."""
    return torch.where(std > 1e-6, 1.0 / std, torch.ones_like(std))
