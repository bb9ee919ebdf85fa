"""The options of transformer training (causal, and masked: `MaskedOptions`): presets,
shapes and checks, without torch, so that the web process can check a request.
`evaluations.training.causal` trains with them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, ClassVar

ARCHITECTURES = ("gpt2", "llama")
# A masked model's architecture: BERT's (post-norm layers, learned positions, an MLM head).
MASKED_ARCHITECTURES = ("bert",)
CHECKPOINT_PREFIX = "checkpoint-"  # a checkpoint's folder: checkpoint-<tokens>
# Every entry of the loss log, one JSON object a line, in the model's folder; the run's
# row keeps at most about LOG_POINTS of them (`thin_log`).
LOSS_FILE = "loss.jsonl"
LOG_POINTS = 500
# Tokenizers trained on the corpus; "model": a registered model's, as it is.
TOKENIZERS = ("bpe", "unigram", "model")
# A masked model's: byte-level BPE (the default, as RoBERTa's) or WordPiece (BERT's),
# each with [CLS], [SEP], [MASK], [PAD] and [UNK]; or a registered model's that has a mask
# token. BPE by default: it spells every word (WordPiece makes a word with a character the
# corpus never had [UNK] whole), it is the causal runs' (the same corpus then gives both
# objectives nearly the same pieces), and tokenizers trains it the same way every time
# (WordPiece breaks ties between equally frequent pairs in an order that varies).
MASKED_TOKENIZERS = ("bpe", "wordpiece", "model")
# BERT's masking: each chosen token is [MASK] in 80% of cases, a random token in 10%, and
# left as it is in 10% (Devlin et al. 2019, 3.1).
MASK_PROBABILITY = 0.15
# Which checkpoint folders stay: every one, those on the log-spaced schedule (the
# `save_every` ones are resume points only), or the last `keep_last`.
RETENTIONS = ("all", "schedule", "last")
# torch.compile of the training forward and backward: "auto" compiles on a GPU only (on a
# CPU the compilation costs more than a short run gains), "on" and "off" as they say.
COMPILE_MODES = ("auto", "on", "off")


class CausalTrainingError(ValueError):
    """The options or the corpus cannot give a model; the message says why."""


@dataclass(frozen=True)
class ModelShape:
    arch: str  # "gpt2", "llama" or (masked) "bert"
    layers: int
    width: int
    heads: int
    context: int
    vocab: int


PRESETS: dict[str, ModelShape] = {
    # For tests and smoke runs: trains in seconds on a CPU.
    "tiny": ModelShape("gpt2", layers=2, width=64, heads=2, context=64, vocab=512),
    "tiny-llama": ModelShape("llama", layers=2, width=64, heads=2, context=64, vocab=512),
    # GPT-2 small (124M parameters with its 50,257-token vocabulary).
    "small": ModelShape("gpt2", layers=12, width=768, heads=12, context=1024, vocab=50257),
    # The same size in the Llama style (RoPE, SwiGLU, RMSNorm, no biases).
    "small-llama": ModelShape("llama", layers=12, width=768, heads=12, context=1024, vocab=32000),
}
# Masked models' shapes (BERT style; "custom" changes small-bert's).
MASKED_PRESETS: dict[str, ModelShape] = {
    "tiny-bert": ModelShape("bert", layers=2, width=64, heads=2, context=64, vocab=512),
    # BERT-base: 12 layers of 768, 512 positions (110M parameters with its 30,522 tokens).
    "small-bert": ModelShape("bert", layers=12, width=768, heads=12, context=512, vocab=30522),
}


# The largest value a request may give each field of a shape: far above the presets, far
# below what one GPU holds; the caps on parameters and memory (services) hold the whole.
SHAPE_MAXIMA = {"layers": 256, "width": 16_384, "heads": 256, "context": 32_768, "vocab": 262_144}
# The embedding and output layer have a multiple of this many rows (the tokenizer's tokens
# and unused rows after them): a matrix product with an odd dimension, as GPT-2's 50,257
# is, runs well below the card's rate. The loss reads the real tokens' logits only, and a
# saved model has the real rows only, so no probability ever goes to an unused row.
VOCAB_MULTIPLE = 64
# Memory while training (see training_memory_bytes): bytes per parameter (float32 weights,
# gradients and AdamW's two moments), bytes per token of a micro-batch for each layer and
# unit of width (activations kept for the backward pass, bf16 autocast, eager; another
# architecture, a base model's, counts as the larger), and per vocabulary row (logits).
BYTES_PER_PARAMETER = 4 + 4 + 2 * 4
# BERT's layer is GPT-2's (attention, a 4 x width GELU MLP, two layer norms): its k is
# GPT-2's, not measured on a GPU.
ACTIVATION_BYTES = {"gpt2": 88, "llama": 56, "bert": 88}
LOGIT_BYTES = 12


def padded_vocab(tokens: int) -> int:
    return -(-tokens // VOCAB_MULTIPLE) * VOCAB_MULTIPLE


def llama_intermediate(width: int) -> int:
    """The Llama style's MLP width: 8/3 of the width, rounded up to a multiple of 64."""
    return int(8 * width / 3 + 63) // 64 * 64


def parameter_count(shape: ModelShape) -> int:
    """The parameters of a model of `shape` as `causal.build_model` builds it, with the
    vocabulary's rows only (the saved model's count). GPT-2: the token and position
    embeddings, and per layer 12 x width^2 + 13 x width (attention's four matrices and
    the 4 x width MLP, their biases, two layer norms), a last layer norm; the output layer
    is the token embedding. Llama: the token embedding (tied), per layer 4 x width^2
    (attention, no biases), 3 x width x the MLP's width (SwiGLU) and two norms, a last
    norm. BERT: the token, position and two token-type embeddings and their layer norm,
    per layer what GPT-2's has, the MLM head's transform (width^2 + width and a layer
    norm) and its output bias (a row's; the output weight is the token embedding).
    Another architecture (a base model's) is counted as GPT-2: an estimate."""
    s = shape
    if s.arch == "bert":
        layer = 12 * s.width**2 + 13 * s.width
        embeddings = (s.vocab + s.context + 2) * s.width + 2 * s.width
        return embeddings + s.layers * layer + s.width**2 + 3 * s.width + s.vocab
    if s.arch == "llama":
        layer = 4 * s.width**2 + 3 * s.width * llama_intermediate(s.width) + 2 * s.width
        return s.vocab * s.width + s.layers * layer + s.width
    layer = 12 * s.width**2 + 13 * s.width
    return (s.vocab + s.context) * s.width + s.layers * layer + 2 * s.width


@dataclass(frozen=True)
class MemoryEstimate:
    """What a training process needs on its device, in bytes: the model's state and the
    activations of one micro-batch."""

    state: int
    activations: int

    @property
    def total(self) -> int:
        return self.state + self.activations


def training_memory(shape: ModelShape, micro_batch: int) -> MemoryEstimate:
    """The memory of training `shape` on micro-batches of `micro_batch` sequences of its
    context, on a GPU (bf16 autocast, eager), per device:

        16 x P  +  micro_batch x context x (k x layers x width + 12 x V)

    16 bytes per parameter P: float32 weights, gradients and AdamW's two moments. Per
    token, the activations every layer keeps for the backward pass, k bytes per unit of
    width (k = 88 for GPT-2 and BERT, 56 for Llama), and the logits, 12 bytes per row of the
    padded vocabulary V (the bf16 output, its float32 copy, the log-softmax and their
    gradients). Attention is PyTorch's fused kernel, which keeps no context x context
    matrix. k and 12 are fitted to the peaks measured on an H200 (docs/training.md:
    `small`, 16 eager, 23,852 MiB; `small-llama`, 32 eager, 29,723 MiB; the estimate is
    within 1% of both). Not counted: the CUDA context and allocator slack (a few hundred
    MB), DistributedDataParallel's gradient buckets (4 more bytes per parameter on each of
    several devices). A compiled run (the worker compiles when it can) needs about half
    the activations; a CPU run keeps them in float32 with the attention matrices, more."""
    per_layer = ACTIVATION_BYTES.get(shape.arch, max(ACTIVATION_BYTES.values()))
    per_token = per_layer * shape.layers * shape.width + LOGIT_BYTES * padded_vocab(shape.vocab)
    return MemoryEstimate(
        state=BYTES_PER_PARAMETER * parameter_count(shape),
        activations=micro_batch * shape.context * per_token,
    )


@dataclass
class CausalOptions:
    """A transformer's training options: a causal model's, and with `MaskedOptions`'s
    two more, a masked model's (the same training with another objective)."""

    objective: ClassVar[str] = "causal"
    architectures: ClassVar[tuple[str, ...]] = ARCHITECTURES
    tokenizers: ClassVar[tuple[str, ...]] = TOKENIZERS

    shape: ModelShape
    steps: int
    batch_tokens: int = 0  # tokens per optimizer step; 0: one micro-batch
    micro_batch: int = 8  # sequences per forward pass
    learning_rate: float = 1e-3
    min_lr_ratio: float = 0.1  # the cosine ends at learning_rate * this
    warmup_steps: int = -1  # -1: 5% of the steps (at least 1)
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    seed: int = 0
    device: str = "cpu"
    checkpoints: int = 8  # log-spaced; the last is the final step
    # Training states (optimizer, ...) kept: the last N checkpoints' (0: all). Weights
    # and tokenizer stay in every checkpoint: they are registered models.
    keep_states: int = 0
    # Testing and cancelling: stop (after saving) once this step's checkpoint is written.
    stop_after_step: int = 0
    # Continued pre-training: the folder (or hub id) of a causal model whose weights and
    # tokenizer are trained further; the shape is then the model's (see base_shape).
    base_model: str = ""
    # "bpe" or "unigram" trained on the corpus, or "model": tokenizer_source's tokenizer.
    tokenizer: str = "bpe"
    tokenizer_source: str = ""
    # Extra checkpoints every N steps besides the schedule (0: none), to resume from.
    save_every: int = 0
    retention: str = "all"
    keep_last: int = 0  # retention "last": the checkpoint folders kept
    compile: str = "auto"  # one of COMPILE_MODES
    # Data parallelism: this many processes, one a device (GPUs cuda:0.. on "cuda", or
    # CPU processes on "cpu"), each taking its share of every step's micro-batches.
    devices: int = 1

    @property
    def compiles(self) -> bool:
        return self.compile == "on" or (self.compile == "auto" and self.device != "cpu")

    @property
    def trains_tokenizer(self) -> bool:
        return not self.base_model and self.tokenizer != "model"

    def check(self) -> None:
        s = self.shape
        problems = []
        if not self.base_model and s.arch not in self.architectures:
            problems.append(
                f"architecture {s.arch!r} is not one of a {self.objective} model's: "
                f"{', '.join(self.architectures)}"
            )
        if min(s.layers, s.width, s.heads, s.context) < 1:
            problems.append("layers, width, heads and context must be 1 or more")
        elif s.width % s.heads:
            problems.append(f"the width ({s.width}) must be a multiple of the heads ({s.heads})")
        if self.trains_tokenizer and s.vocab < 260:
            problems.append(f"the vocabulary must hold the 256 bytes and more; got {s.vocab}")
        if self.tokenizer not in self.tokenizers:
            problems.append(
                f"tokenizer {self.tokenizer!r} is not one of a {self.objective} model's: "
                f"{', '.join(self.tokenizers)}"
            )
        elif self.tokenizer == "model" and not (self.tokenizer_source or self.base_model):
            problems.append("tokenizer 'model' needs the model whose tokenizer to use")
        elif self.base_model and self.tokenizer != "model":
            problems.append(
                "continued pre-training uses its base model's tokenizer: leave the tokenizer out"
            )
        if self.retention not in RETENTIONS:
            problems.append(f"retention {self.retention!r} is not one of {', '.join(RETENTIONS)}")
        elif self.retention == "last" and self.keep_last < 1:
            problems.append(f"retention 'last' keeps 1 checkpoint or more; got {self.keep_last}")
        if self.compile not in COMPILE_MODES:
            problems.append(f"compile {self.compile!r} is not one of {', '.join(COMPILE_MODES)}")
        if self.save_every < 0:
            problems.append(f"save_every is 0 (none) or a number of steps; got {self.save_every}")
        if self.steps < 1:
            problems.append(f"train for 1 step or more; got {self.steps}")
        if self.micro_batch < 1:
            problems.append(f"the micro-batch must be 1 sequence or more; got {self.micro_batch}")
        if not self.learning_rate > 0:
            problems.append(f"the learning rate must be positive; got {self.learning_rate}")
        if self.keep_states < 0:
            problems.append(f"keep_states is 0 (all) or more; got {self.keep_states}")
        if self.checkpoints < 1:
            problems.append(f"keep 1 checkpoint or more; got {self.checkpoints}")
        if self.device not in ("cpu", "cuda") and not self.device.startswith("cuda:"):
            problems.append(f"device {self.device!r}: give cpu or cuda")
        if self.devices < 1:
            problems.append(f"train on 1 device or more; got {self.devices}")
        elif self.devices > 1:
            if self.device.startswith("cuda:"):
                problems.append(
                    f"several devices train on cuda (cuda:0 to cuda:{self.devices - 1}) or "
                    f"cpu, not on {self.device}"
                )
            if self.micro_batch >= 1 and self.accumulation % self.devices:
                per_pass = self.micro_batch * s.context
                problems.append(
                    f"a step's {self.accumulation} micro-batches do not split evenly across "
                    f"{self.devices} devices: give a batch of tokens that is a multiple of "
                    f"{per_pass * self.devices} ({self.devices} x {self.micro_batch} sequences "
                    f"x {s.context} tokens)"
                )
        problems += self.objective_problems()
        if problems:
            raise CausalTrainingError("; ".join(problems))

    def objective_problems(self) -> list[str]:
        return []

    @property
    def accumulation(self) -> int:
        per_pass = self.micro_batch * self.shape.context
        return max(1, math.ceil(self.batch_tokens / per_pass)) if self.batch_tokens else 1

    @property
    def tokens_per_step(self) -> int:
        return self.accumulation * self.micro_batch * self.shape.context

    @property
    def warmup(self) -> int:
        if self.warmup_steps >= 0:
            return min(self.warmup_steps, self.steps)
        return max(1, round(0.05 * self.steps))


@dataclass
class MaskedOptions(CausalOptions):
    """A masked model's training: BERT's masked-LM objective (see
    `evaluations.training.masked`), from scratch (no base model)."""

    objective: ClassVar[str] = "masked"
    architectures: ClassVar[tuple[str, ...]] = MASKED_ARCHITECTURES
    tokenizers: ClassVar[tuple[str, ...]] = MASKED_TOKENIZERS

    # The share of tokens chosen for prediction (each independently; with whole-word
    # masking, each word independently, with all its tokens).
    mask_probability: float = MASK_PROBABILITY
    whole_word_masking: bool = False

    def objective_problems(self) -> list[str]:
        problems = []
        if self.base_model:
            problems.append(
                "continued pre-training trains a causal model; a masked one starts afresh"
            )
        if not 0.0 < self.mask_probability < 1.0:
            problems.append(
                f"the mask probability must be above 0 and below 1; got {self.mask_probability}"
            )
        return problems


def options_class(kind: str) -> type[CausalOptions]:
    """The options of a transformer run of `kind` ("causal" or "masked")."""
    return MaskedOptions if kind == MaskedOptions.objective else CausalOptions


def presets_of(kind: str) -> dict[str, ModelShape]:
    return MASKED_PRESETS if kind == MaskedOptions.objective else PRESETS


def usable_devices(accumulation: int, available: int) -> int:
    """The most of `available` devices that a step's `accumulation` micro-batches split
    evenly across: a training run then sees the same batches however many it gets."""
    return max(d for d in range(1, max(1, available) + 1) if accumulation % d == 0)


def shape_for(preset: str, kind: str = "causal", **overrides: int | str | None) -> ModelShape:
    """A preset of a `kind` of run ("causal" or "masked") with the given fields replaced;
    "custom": GPT-2 small's shape, or BERT-base's (small-bert) for a masked run."""
    presets = presets_of(kind)
    if preset != "custom" and preset not in presets:
        known = preset in PRESETS or preset in MASKED_PRESETS
        raise CausalTrainingError(
            f"{'the' if known else 'unknown'} preset {preset!r}"
            f"{f' is not a {kind} model' if known else ''}; choose one of "
            f"{', '.join([*presets, 'custom'])}"
        )
    shape = presets.get(preset, presets["small-bert" if presets is MASKED_PRESETS else "small"])
    changes = {k: v for k, v in overrides.items() if v is not None}
    return replace(shape, **changes)  # type: ignore[arg-type]


def base_shape(source: str, context: int | None = None) -> ModelShape:
    """The shape of a causal model to train further (its config, read without loading
    the weights), with `context` (at most the model's positions) or the model's own
    (at most 1024). CausalTrainingError when it cannot be read or is not causal."""
    from transformers import AutoConfig

    from evaluations.scoring.kinds import CAUSAL, kind_from_config
    from evaluations.scoring.schema import ModelLoadError

    try:
        config = AutoConfig.from_pretrained(source, local_files_only=True)
        kind = kind_from_config(config)
    except (OSError, ValueError, ModelLoadError) as exc:
        raise CausalTrainingError(
            f"cannot read the model {source!r} to train further: {exc}"
        ) from None
    if kind != CAUSAL:
        raise CausalTrainingError(
            f"the model {source!r} is a {kind} model; only a causal model can be trained further"
        )
    positions = getattr(config, "n_positions", None) or getattr(
        config, "max_position_embeddings", None
    )
    positions = int(positions or 1024)
    if context is None:
        context = min(positions, 1024)
    elif context > positions:
        raise CausalTrainingError(
            f"the context ({context}) is longer than the model's {positions} positions"
        )

    def field(*names: str) -> int:
        for name in names:
            if getattr(config, name, None):
                return int(getattr(config, name))
        return 0

    return ModelShape(
        arch=str(config.model_type),
        layers=field("n_layer", "num_hidden_layers"),
        width=field("n_embd", "hidden_size"),
        heads=field("n_head", "num_attention_heads"),
        context=context,
        vocab=field("vocab_size"),
    )


def separator_id(tokenizer: Any) -> int:
    """The token before every line: the tokenizer's BOS, else its EOS (a model's own
    tokenizer may have either); the scorer conditions the first word on the same."""
    for token_id in (tokenizer.bos_token_id, tokenizer.eos_token_id):
        if token_id is not None:
            return int(token_id)
    raise CausalTrainingError(
        "the tokenizer has neither a BOS nor an EOS token to start each line with"
    )


def model_tokenizer(source: str, kind: str = "causal") -> Any:
    """A registered model's tokenizer (a fast one, for offsets), checked to have a token
    to start each line with (causal) or a mask token (masked)."""
    from transformers import AutoTokenizer

    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=True)
    except (OSError, ValueError, ImportError) as exc:
        raise CausalTrainingError(f"cannot load the tokenizer of {source!r}: {exc}") from None
    if not getattr(tokenizer, "is_fast", False):
        raise CausalTrainingError(f"the tokenizer of {source!r} is not a fast tokenizer")
    if kind != MaskedOptions.objective:
        separator_id(tokenizer)
    elif tokenizer.mask_token_id is None:
        raise CausalTrainingError(
            f"the tokenizer of {source!r} has no mask token, which a masked model predicts"
        )
    return tokenizer


def log_stride(steps: int, points: int = LOG_POINTS) -> int:
    """The step stride that leaves at most `points` training-loss points of `steps` steps:
    1, 2, 4, ... (a power of 2, so that the points kept at one stride are kept at the next)."""
    stride = 1
    while steps // stride > points:
        stride *= 2
    return stride


def thin_log(entries: list[dict[str, Any]], steps: int) -> list[dict[str, Any]]:
    """The loss log as the run's row keeps it: every validation entry, and the training
    loss of the first step, of every step on a stride of `log_stride(steps)`, and of the
    last step reported. Thinning what was thinned keeps the same entries, whatever the
    reports' sizes, so the row can be thinned at each report."""
    stride = log_stride(max(steps, 1))
    if stride == 1:
        return entries
    train = [e for e in entries if "validation_loss" not in e]
    last = train[-1]["step"] if train else None
    return [
        e
        for e in entries
        if "validation_loss" in e or int(e["step"]) % stride == 0 or int(e["step"]) in (1, last)
    ]
