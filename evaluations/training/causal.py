"""Training a causal language model, from scratch or further from a causal model's folder
(continued pre-training: its weights and tokenizer), or a masked one from scratch
(`MaskedOptions`: BERT's objective, see `evaluations.training.masked`, which this module
asks for its tokenizer, data framing, model and loss): a byte-level BPE or Unigram
tokenizer trained on the corpus with `tokenizers` (or a model's own), a GPT-2- or
Llama-style model from transformers, AdamW with linear warm-up and cosine decay, bf16
autocast on a GPU (never on the CPU), gradient accumulation to a token batch size,
documents packed into the context; on a GPU also torch.compile of the model (`compile`),
fused AdamW and TF32 for what runs in float32. No Django: the `train` command and the training
worker both call `train_causal`.

Checkpoints fall on a log-spaced schedule of steps (so of tokens seen, as BabyLM does).
Each is a `save_pretrained` folder `checkpoint-<tokens>/` (model and tokenizer) with
`training_state.pt`: optimizer, scheduler, random states, step, data position and the
loss log. Training that finds checkpoints in its folder resumes from the last one: the
same seed and options then give the same model as training straight through.
`save_every` adds checkpoints off the schedule, and `retention` deletes the folders it
does not keep (never the newest). The finished model is saved in the folder itself,
which `manage.py score --model` reads.

The data: every training line becomes a separator (`<|endoftext|>`, or a model's own BOS
or EOS) + its tokens; the stream of all of them is cut into blocks of the context
length, stored once in `data/` as uint32, and the blocks are read in a seeded
permutation per epoch.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import pickle
import random
import re
import shutil
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from numpy._core.multiarray import _reconstruct as np_reconstruct

from evaluations.baseline import END_OF_TEXT, byte_level_bpe
from evaluations.scoring import sources
from evaluations.training import masked
from evaluations.training.options import (  # noqa: F401 - the options are part of this API
    ARCHITECTURES,
    CHECKPOINT_PREFIX,
    COMPILE_MODES,
    LOSS_FILE,
    MASKED_ARCHITECTURES,
    MASKED_PRESETS,
    MASKED_TOKENIZERS,
    PRESETS,
    RETENTIONS,
    TOKENIZERS,
    VOCAB_MULTIPLE,
    CausalOptions,
    CausalTrainingError,
    MaskedOptions,
    ModelShape,
    base_shape,
    llama_intermediate,
    model_tokenizer,
    options_class,
    padded_vocab,
    presets_of,
    separator_id,
    shape_for,
    thin_log,
    usable_devices,
)

UNKNOWN = "<unk>"
STATE_NAME = "training_state.pt"
INFO_NAME = "training.json"
# The inputs of the training in a folder, which a resume must match (`check_inputs`).
INPUTS_NAME = "inputs.json"
# The files a training writes in its folder besides checkpoints, `data/` and weights.
TRAINING_FILES = frozenset(
    {INFO_NAME, INPUTS_NAME, LOSS_FILE, "config.json", "generation_config.json", "STOP"}
)
DATA_DIR = "data"
# Validation loss is the mean over at most this many blocks.
MAX_EVAL_BLOCKS = 64
# Embeddings of positions (and BERT's token types): no weight decay, as on biases and norms.
NOT_DECAYED = ("wpe", "position_embeddings", "token_type_embeddings")


def checkpoint_steps(steps: int, count: int) -> list[int]:
    """`count` steps spaced evenly on a log scale from 1 to `steps` (fewer when they
    coincide); the last is always `steps`."""
    if count <= 1 or steps <= 1:
        return [steps]
    spaced = np.unique(np.round(np.geomspace(1, steps, count)).astype(int)).tolist()
    return sorted({*spaced, steps})


def lr_factor(step: int, options: CausalOptions) -> float:
    """The learning rate at `step` (counted from 0) as a share of the peak: linear
    warm-up, then a cosine down to min_lr_ratio at the last step."""
    warmup = options.warmup
    if step < warmup:
        return (step + 1) / warmup
    span = max(1, options.steps - warmup)
    progress = min(1.0, (step - warmup) / span)
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    return options.min_lr_ratio + (1.0 - options.min_lr_ratio) * cosine


# --- tokenizer and data -------------------------------------------------------------------


def train_tokenizer(lines: Iterable[str], vocab: int, kind: str = "bpe") -> Any:
    """A tokenizer trained on `lines` with `tokenizers`, as a transformers fast tokenizer
    whose BOS and EOS are `<|endoftext|>`: "bpe", a byte-level BPE (GPT-2 style), or
    "unigram", a Unigram model over words split at spaces (SentencePiece style, `<unk>`
    for characters it never saw)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    if kind == "unigram":
        core = Tokenizer(models.Unigram())
        core.pre_tokenizer = pre_tokenizers.Metaspace()
        core.decoder = decoders.Metaspace()
        unigram = trainers.UnigramTrainer(
            vocab_size=vocab,
            special_tokens=[END_OF_TEXT, UNKNOWN],
            unk_token=UNKNOWN,
            show_progress=False,
        )
        core.train_from_iterator(lines, trainer=unigram)
        return PreTrainedTokenizerFast(
            tokenizer_object=core, bos_token=END_OF_TEXT, eos_token=END_OF_TEXT, unk_token=UNKNOWN
        )
    return PreTrainedTokenizerFast(
        tokenizer_object=byte_level_bpe(lines, vocab, trim_offsets=True),
        bos_token=END_OF_TEXT,
        eos_token=END_OF_TEXT,
    )


def _token_file(tokenizer: Any, lines: Iterable[str], path: Path, masked_lm: bool = False) -> int:
    """The separator (`<|endoftext|>` when the tokenizer is trained here) + the tokens of
    each line, as uint32, into `path`; returns the tokens. `masked_lm`: each line framed
    as the tokenizer frames it, with its words' starts (masked.line_tokens)."""
    eot = None if masked_lm else separator_id(tokenizer)
    total = 0
    batch: list[str] = []
    temp = path.with_suffix(".part")

    def flush(out: Any) -> int:
        if eot is None:
            framed = masked.line_tokens(tokenizer, batch)
            framed.tofile(out)
            return len(framed)
        encoded = tokenizer(batch, add_special_tokens=False)["input_ids"]
        flat: list[int] = []
        for ids in encoded:
            flat.append(eot)
            flat.extend(ids)
        np.asarray(flat, dtype=np.uint32).tofile(out)
        return len(flat)

    with temp.open("wb") as out:
        for line in lines:
            batch.append(line)
            if len(batch) >= 4096:
                total += flush(out)
                batch = []
        if batch:
            total += flush(out)
    os.replace(temp, path)
    return total


def _blocks(path: Path, context: int) -> np.ndarray:
    """The token file as (blocks, context): the last partial block is dropped."""
    tokens = (
        np.memmap(path, dtype=np.uint32, mode="r")
        if path.stat().st_size
        else np.zeros(0, np.uint32)
    )
    usable = (len(tokens) // context) * context
    return (
        np.asarray(tokens[:usable]).reshape(-1, context)
        if usable
        else np.zeros((0, context), np.uint32)
    )


class BlockOrder:
    """Blocks in a seeded permutation per epoch; `position` (blocks handed out) is all
    that a checkpoint needs to carry on exactly."""

    def __init__(self, count: int, seed: int, position: int = 0) -> None:
        self.count = count
        self.seed = seed
        self.position = position
        self._epoch = -1
        self._order = np.zeros(0, dtype=np.int64)

    def take(self, n: int) -> np.ndarray:
        out = np.empty(n, dtype=np.int64)
        for i in range(n):
            epoch, index = divmod(self.position, self.count)
            if epoch != self._epoch:
                self._order = np.random.default_rng([self.seed, epoch]).permutation(self.count)
                self._epoch = epoch
            out[i] = self._order[index]
            self.position += 1
        return out


# --- the model ----------------------------------------------------------------------------


def build_model(shape: ModelShape, tokenizer: Any) -> Any:
    from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM

    if shape.arch in MASKED_ARCHITECTURES:
        return masked.bert_model(shape, tokenizer)
    eot = separator_id(tokenizer)
    vocab = padded_vocab(len(tokenizer))
    if shape.arch == "gpt2":
        config = GPT2Config(
            vocab_size=vocab,
            n_positions=shape.context,
            n_embd=shape.width,
            n_layer=shape.layers,
            n_head=shape.heads,
            resid_pdrop=0.0,
            embd_pdrop=0.0,
            attn_pdrop=0.0,
            bos_token_id=eot,
            eos_token_id=eot,
        )
        return GPT2LMHeadModel(config)
    llama = LlamaConfig(
        vocab_size=vocab,
        hidden_size=shape.width,
        intermediate_size=llama_intermediate(shape.width),
        num_hidden_layers=shape.layers,
        num_attention_heads=shape.heads,
        num_key_value_heads=shape.heads,
        max_position_embeddings=shape.context,
        bos_token_id=eot,
        eos_token_id=eot,
        tie_word_embeddings=True,
    )
    return LlamaForCausalLM(llama)


def _vocab_tensors(model: Any) -> list[torch.Tensor]:
    """The tensors with a row per token: the input embedding, and the output layer's
    weight (often the same) and bias (BERT's MLM head has one)."""
    found: dict[int, torch.Tensor] = {}
    for layer in (model.get_input_embeddings(), model.get_output_embeddings()):
        for tensor in (getattr(layer, "weight", None), getattr(layer, "bias", None)):
            if tensor is not None:
                found[id(tensor)] = tensor
    return list(found.values())


def _rows(model: Any) -> int:
    """The rows of the model's input embedding."""
    return int(model.get_input_embeddings().weight.shape[0])


def _pad_vocab(model: Any, tokens: int) -> None:
    """Give a loaded model (a checkpoint, a base model) the rows `build_model` gives."""
    if _rows(model) != padded_vocab(tokens):
        model.resize_token_embeddings(padded_vocab(tokens), mean_resizing=False)


def lm_loss(model: Any, ids: torch.Tensor, tokens: int) -> torch.Tensor:
    """Mean cross-entropy of each next token, over the first `tokens` logits (the
    tokenizer's): the loss transformers computes with `labels=ids`, with the unused rows
    of a padded output layer left out of the softmax."""
    logits = model(input_ids=ids).logits
    predicted = logits[:, :-1, :tokens].float()
    return torch.nn.functional.cross_entropy(predicted.reshape(-1, tokens), ids[:, 1:].reshape(-1))


class NextToken:
    """The causal objective, as `masked.Masking` is the masked one: a block is its own
    input and labels (`arrays`), its loss `lm_loss`, weighted by the blocks."""

    @staticmethod
    def arrays(blocks: np.ndarray, key: tuple[int, int]) -> tuple[np.ndarray, ...]:
        return (blocks.astype(np.int64),)

    @staticmethod
    def loss(model: Any, ids: torch.Tensor, tokens: int) -> torch.Tensor:
        return lm_loss(model, ids, tokens)

    @staticmethod
    def weight(arrays: tuple[np.ndarray, ...]) -> int:
        return len(arrays[0])


def _objective(options: CausalOptions, tokenizer: Any) -> Any:
    if isinstance(options, MaskedOptions):
        return masked.Masking.of(options, tokenizer)
    return NextToken()


def _model_class(options: CausalOptions) -> Any:
    """The class a checkpoint of this training loads with."""
    from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

    return AutoModelForMaskedLM if isinstance(options, MaskedOptions) else AutoModelForCausalLM


def _optimizer(model: Any, options: CausalOptions) -> torch.optim.Optimizer:
    """AdamW; no weight decay on biases, norms and embeddings of positions."""
    decay: list[torch.nn.Parameter] = []
    plain: list[torch.nn.Parameter] = []
    for name, parameter in model.named_parameters():
        if not parameter.requires_grad:
            continue
        positions = any(part in name for part in NOT_DECAYED)
        (decay if parameter.dim() >= 2 and not positions else plain).append(parameter)
    groups = [
        {"params": decay, "weight_decay": options.weight_decay},
        {"params": plain, "weight_decay": 0.0},
    ]
    # The fused kernel on a GPU: one launch for all parameters instead of a few per tensor.
    fused = options.device != "cpu"
    return torch.optim.AdamW(
        groups, lr=options.learning_rate, betas=(0.9, 0.95), eps=1e-8, fused=fused or None
    )


# --- progress and results -----------------------------------------------------------------


@dataclass
class Checkpoint:
    step: int
    tokens: int
    path: Path
    train_loss: float
    validation_loss: float | None
    bytes: int = 0  # on disk, the training state included
    scheduled: bool = True  # on the log-spaced schedule, not a `save_every` one
    removed: list[str] = field(default_factory=list)  # folders retention removed just now


def folder_bytes(folder: Path) -> int:
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())


@dataclass
class CausalSummary:
    options: dict[str, Any]
    parameters: int = 0
    vocabulary: int = 0
    training_tokens: int = 0  # in the packed stream (one epoch)
    validation_tokens: int = 0
    steps_done: int = 0
    tokens_seen: int = 0
    resumed_from_step: int = 0
    final_loss: float | None = None
    final_validation_loss: float | None = None
    log: list[dict[str, Any]] = field(default_factory=list)  # per step, and evaluations
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    stopped: bool = False
    seconds: float = 0.0


def _rng_state() -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        # A checkpoint made where more GPUs were visible: the states of the first ones.
        for index, cuda_state in enumerate(state["cuda"][: torch.cuda.device_count()]):
            torch.cuda.set_rng_state(cuda_state, index)


# What a training state holds beside tensors, numbers, strings and containers: numpy's
# random state (an array). torch's weights-only unpickler builds nothing else, so a state
# file from elsewhere can hold no code that loading it would run.
_STATE_GLOBALS: list[Any] = [np.ndarray, np.dtype, type(np.dtype(np.uint32)), np_reconstruct]


def load_training_state(folder: Path) -> dict[str, Any]:
    """A checkpoint's training state, every tensor on the CPU: the optimizer's
    load_state_dict moves its own to the parameters' device, and the random states must
    stay CPU byte tensors (torch.set_rng_state takes nothing else)."""
    path = folder / STATE_NAME
    try:
        with torch.serialization.safe_globals(_STATE_GLOBALS):
            state = torch.load(path, map_location="cpu", weights_only=True)
    except (pickle.UnpicklingError, RuntimeError, EOFError) as exc:
        # torch's message is mostly advice on loading it anyway; say what the file holds.
        named = re.search(r"Unsupported global: GLOBAL (\S+)", str(exc))
        cause = (
            f"it calls {named.group(1)}, which no training state holds"
            if named
            else f"{type(exc).__name__}: {' '.join(str(exc).split())[:120]}"
        )
        raise CausalTrainingError(
            f"{folder.name}/{STATE_NAME} is not a training state Gym wrote, or is damaged "
            f"({cause}); it was not loaded, nothing in it was run"
        ) from None
    if not isinstance(state, dict):
        raise CausalTrainingError(f"{folder.name}/{STATE_NAME} is not a training state")
    return state


@contextlib.contextmanager
def training_precision(device: str) -> Iterator[None]:
    """TF32 for what autocast leaves in float32 (the loss's softmax, norms) on a GPU, for
    the training only: a worker that scores afterwards does so in full float32 again."""
    before = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    if device.startswith("cuda"):
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = True
    try:
        yield
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def _prune_states(out_dir: Path, keep: int) -> None:
    """Remove the training states of all but the last `keep` checkpoints (0: keep all);
    a resume needs only the last."""
    if keep <= 0:
        return
    states = sorted(
        (int(child.name.removeprefix(CHECKPOINT_PREFIX)), child / STATE_NAME)
        for child in out_dir.glob(f"{CHECKPOINT_PREFIX}*")
        if child.name.removeprefix(CHECKPOINT_PREFIX).isdigit() and (child / STATE_NAME).is_file()
    )
    for _tokens, state in states[:-keep]:
        state.unlink(missing_ok=True)


def retain_checkpoints(
    out_dir: Path, records: list[dict[str, Any]], options: CausalOptions
) -> list[str]:
    """Delete the checkpoint folders that `options.retention` does not keep ("schedule":
    those off the schedule; "last": all but the last `keep_last`), never the newest (a
    resume starts there). Their records are marked "removed"; returns their folders."""
    if options.retention == "all":
        return []
    standing = [r for r in records if not r.get("removed")]
    if options.retention == "schedule":
        doomed = [r for r in standing[:-1] if not r.get("scheduled", True)]
    else:
        doomed = standing[: -max(1, options.keep_last)]
    for record in doomed:
        shutil.rmtree(out_dir / record["folder"], ignore_errors=True)
        record["removed"] = True
    return [r["folder"] for r in doomed]


def _base_model(source: str, tokenizer: Any) -> Any:
    """The causal model to train further, in float32, its embeddings as many as the
    tokenizer's tokens."""
    from transformers import AutoModelForCausalLM

    try:
        model = AutoModelForCausalLM.from_pretrained(
            source, dtype=torch.float32, local_files_only=True
        )
    except (OSError, ValueError) as exc:
        raise CausalTrainingError(f"cannot load the model {source!r}: {exc}") from None
    embeddings = model.get_input_embeddings()
    assert isinstance(embeddings, torch.nn.Embedding)
    if embeddings.num_embeddings < len(tokenizer):
        model.resize_token_embeddings(len(tokenizer))
    return model


def latest_checkpoint(out_dir: Path) -> Path | None:
    """The checkpoint with the most tokens that holds a complete training state."""
    found = []
    for child in out_dir.glob(f"{CHECKPOINT_PREFIX}*"):
        suffix = child.name.removeprefix(CHECKPOINT_PREFIX)
        if suffix.isdigit() and (child / STATE_NAME).is_file():
            found.append((int(suffix), child))
    return max(found)[1] if found else None


def _evaluate(
    model: Any,
    blocks: np.ndarray,
    options: CausalOptions,
    autocast: Any,
    tokens: int,
    objective: Any,
) -> float | None:
    """The objective's mean loss on the first MAX_EVAL_BLOCKS validation blocks (masked
    the same way at every checkpoint)."""
    if len(blocks) == 0:
        return None
    model.eval()
    losses: list[float] = []
    weights: list[int] = []
    with torch.no_grad():
        for start in range(0, min(len(blocks), MAX_EVAL_BLOCKS), options.micro_batch):
            chunk = blocks[start : min(start + options.micro_batch, MAX_EVAL_BLOCKS)]
            arrays = objective.arrays(chunk, (masked.VALIDATION_STREAM, start))
            tensors = [torch.from_numpy(a).to(options.device) for a in arrays]
            with autocast():
                loss = objective.loss(model, *tensors, tokens)
            losses.append(float(loss.float()))
            weights.append(objective.weight(arrays))
    model.train()
    if not sum(weights):
        return None
    return float(np.average(losses, weights=weights))


def _save_folder(model: Any, tokenizer: Any, folder: Path, tokens: int) -> None:
    """The model with its vocabulary's `tokens` rows only (see VOCAB_MULTIPLE), and the
    tokenizer."""
    folder.mkdir(parents=True, exist_ok=True)
    rows = _rows(model)
    if rows == tokens:
        model.save_pretrained(folder)
    else:
        shared = {weight.data_ptr() for weight in _vocab_tensors(model)}
        state = {
            name: value[:tokens] if value.data_ptr() in shared else value
            for name, value in model.state_dict().items()
        }
        model.config.vocab_size = tokens
        try:
            model.save_pretrained(folder, state_dict=state)
        finally:
            model.config.vocab_size = rows
    tokenizer.save_pretrained(folder)


class TrainingProcessError(RuntimeError):
    """One of the processes of a training on several devices failed; the message names it
    and its error, a note holds its traceback."""


def train_causal(
    lines: Callable[[], Iterator[str]],
    validation: Callable[[], Iterator[str]],
    out_dir: Path,
    options: CausalOptions,
    *,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    on_checkpoint: Callable[[Checkpoint], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    fresh: bool = False,
) -> CausalSummary:
    """Train (or resume, when the folder's training had the same inputs: `check_inputs`;
    `fresh` clears what an earlier training left there first) in `out_dir`. `lines` and `validation` give the training and
    validation lines afresh each time they are called. `on_step` hears of every step
    ({step, tokens, loss, lr, ...}); `on_checkpoint` of every checkpoint once it is on
    disk; `should_stop` is asked after every step (a cancelled run stops there). With
    `options.devices` above 1 the training runs in that many processes (see
    `_train_parallel`); the callbacks are still called in this one."""
    options.check()
    if options.device.startswith("cuda"):
        if not torch.cuda.is_available():
            raise CausalTrainingError("device cuda, but no GPU is visible here")
        if options.devices > torch.cuda.device_count():
            raise CausalTrainingError(
                f"{options.devices} devices, but {torch.cuda.device_count()} GPUs are visible here"
            )
    started = time.time()
    if fresh:
        clear_training(out_dir)
    check_inputs(out_dir, training_inputs(lines, validation, options))
    tokenizer = _prepare(lines, validation, out_dir, options)
    # The same arguments either way; only the ranks after 0 of `_train` give None.
    train = _train_parallel if options.devices > 1 else _train
    with training_precision(options.device):
        summary = train(
            out_dir,
            options,
            tokenizer,
            started,
            on_step=on_step,
            on_checkpoint=on_checkpoint,
            should_stop=should_stop,
        )
    assert summary is not None  # None comes from the ranks after 0 only
    return summary


# What a training's result does not depend on: a resume may change them.
RESUME_MAY_CHANGE = frozenset(
    {"device", "devices", "compile", "retention", "keep_last", "keep_states", "save_every",
     "stop_after_step", "checkpoints"}
)  # fmt: skip


def _lines_hash(lines: Iterator[str]) -> str:
    digest = hashlib.sha256()
    count = 0
    for line in lines:
        digest.update(line.encode("utf-8", "surrogatepass") + b"\n")
        count += 1
    return f"{digest.hexdigest()} ({count:,} lines)"


def training_inputs(
    lines: Callable[[], Iterator[str]],
    validation: Callable[[], Iterator[str]],
    options: CausalOptions,
) -> dict[str, Any]:
    """What a training in a folder depends on: its objective, the training and the
    validation lines (hashed) and every option but those in RESUME_MAY_CHANGE."""
    return {
        "objective": options.objective,
        "corpus": _lines_hash(lines()),
        "validation": _lines_hash(validation()),
        **{
            key: value
            for key, value in sorted(asdict(options).items())
            if key not in RESUME_MAY_CHANGE
        },
    }


def check_inputs(out_dir: Path, inputs: dict[str, Any]) -> None:
    """Record `inputs` in a folder without training in it; in one with, refuse unless
    they are the recorded ones (a resume on another corpus, tokenizer or options would
    train a model that neither set of inputs describes). The message names each that
    differs, and the ways out."""
    recorded_file = out_dir / INPUTS_NAME
    earlier = latest_checkpoint(out_dir) is not None or (out_dir / DATA_DIR).is_dir()
    if recorded_file.is_file():
        recorded = json.loads(recorded_file.read_text(encoding="utf-8"))
    elif earlier:
        recorded = {"corpus": "not recorded (a folder trained before inputs were recorded)"}
    else:
        out_dir.mkdir(parents=True, exist_ok=True)
        recorded_file.write_text(json.dumps(inputs, indent=2, default=str) + "\n", "utf-8")
        return
    differ = [
        f"{key}: {_shown(recorded.get(key))} before, {_shown(inputs.get(key))} now"
        for key in sorted(set(recorded) | set(inputs))
        if json.loads(json.dumps(recorded.get(key), default=str))
        != json.loads(json.dumps(inputs.get(key), default=str))
    ]
    if differ:
        raise CausalTrainingError(
            f"{out_dir} holds a training with other inputs, so it cannot be resumed: "
            + "; ".join(differ)
            + ". Train with the same corpus and options to resume it, start afresh there "
            "(manage.py train --fresh deletes its checkpoints), or give another folder"
        )


def _shown(value: Any) -> str:
    text = json.dumps(value, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def clear_training(out_dir: Path) -> None:
    """Remove what a training wrote in `out_dir` (checkpoints, token files, logs, the
    inputs it recorded, the finished model's weights), so that the next starts afresh."""
    if not out_dir.is_dir():
        return
    for child in out_dir.iterdir():
        trained = child.name.startswith(CHECKPOINT_PREFIX) or child.name == DATA_DIR
        if trained and child.is_dir():
            shutil.rmtree(child)
        elif child.name in TRAINING_FILES or child.suffix == ".safetensors":
            child.unlink()


def _prepare(
    lines: Callable[[], Iterator[str]],
    validation: Callable[[], Iterator[str]],
    out_dir: Path,
    options: CausalOptions,
) -> Any:
    """The tokenizer (the last checkpoint's, the one in `data/`, or a new one) and the
    token files in `data/`, made once per folder."""
    from transformers import AutoTokenizer

    out_dir.mkdir(parents=True, exist_ok=True)
    data_dir = out_dir / DATA_DIR
    data_dir.mkdir(exist_ok=True)
    resume = latest_checkpoint(out_dir)
    masked_lm = isinstance(options, MaskedOptions)
    if resume is not None:
        tokenizer = AutoTokenizer.from_pretrained(resume)
    elif (data_dir / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(data_dir)
    else:
        if options.trains_tokenizer:
            train = masked.train_tokenizer if masked_lm else train_tokenizer
            tokenizer = train(lines(), options.shape.vocab, options.tokenizer)
        else:
            source = options.base_model or options.tokenizer_source
            tokenizer = model_tokenizer(sources.resolve(source), options.objective)
        tokenizer.save_pretrained(data_dir)
    train_file, valid_file = data_dir / "train.bin", data_dir / "validation.bin"
    if not train_file.is_file():
        _token_file(tokenizer, lines(), train_file, masked_lm)
    if not valid_file.is_file():
        _token_file(tokenizer, validation(), valid_file, masked_lm)
    if len(_blocks(train_file, options.shape.context)) == 0:
        raise CausalTrainingError(
            f"the training text is {train_file.stat().st_size // 4} tokens, less than one "
            f"context of {options.shape.context}: give a larger corpus or a shorter context"
        )
    return tokenizer


@dataclass(frozen=True)
class _Group:
    """This process's place in a training on several devices."""

    rank: int
    size: int


@dataclass
class _Loop:
    """What the training loop works with, made by `_loop`: `model` is what is saved and
    evaluated, `trained` what trains (the model, or its DistributedDataParallel wrapper,
    `parallel`, which averages the gradients of every rank in the backward pass of each
    rank's last micro-batch). `vocab_rows`: the rows of the model's own vocabulary (a
    loaded model's may be more than its tokenizer's entries); the model trains with them
    padded (see VOCAB_MULTIPLE)."""

    options: CausalOptions
    out_dir: Path
    tokenizer: Any
    group: _Group | None
    device: torch.device
    model: Any
    trained: Any
    parallel: torch.nn.parallel.DistributedDataParallel | None
    vocab_rows: int
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LambdaLR
    order: BlockOrder
    train_blocks: np.ndarray
    valid_blocks: np.ndarray
    objective: Any = None
    # The compiled loss while the compiler works (see `micro_loss`).
    compiled: list[Any] = field(default_factory=list)

    @property
    def rank(self) -> int:
        return self.group.rank if self.group else 0

    @property
    def size(self) -> int:
        return self.group.size if self.group else 1

    def autocast(self) -> Any:
        # bf16 on a GPU (and TF32, under training_precision), never on the CPU.
        return torch.autocast(
            device_type=self.device.type, dtype=torch.bfloat16, enabled=self.device.type == "cuda"
        )

    def micro_loss(self, *tensors: torch.Tensor) -> torch.Tensor:
        """One micro-batch's loss, compiled while the compiler works (with compile
        "auto", a machine whose compiler cannot build the kernels trains eagerly)."""
        if self.compiled:
            try:
                with self.autocast():
                    return self.compiled[0](*tensors)
            except Exception as exc:  # noqa: BLE001 - any failure of the compiler
                if self.options.compile == "on":
                    raise CausalTrainingError(f"torch.compile failed: {exc}") from exc
                warnings.warn(f"torch.compile failed, training without it: {exc}", stacklevel=1)
                self.compiled.clear()
        with self.autocast():
            return self.objective.loss(self.trained, *tensors, self.vocab_rows)


def _train(
    out_dir: Path,
    options: CausalOptions,
    tokenizer: Any,
    started: float,
    *,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    on_checkpoint: Callable[[Checkpoint], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    group: _Group | None = None,
) -> CausalSummary | None:
    """The training loop, in one process or, with `group`, in one process of several
    (torch.distributed's, already set up): there rank 0 alone evaluates, writes
    checkpoints and the summary, hears `should_stop` and calls the callbacks, and its
    decision to stop reaches every rank. Returns the summary (None on other ranks)."""
    summary = CausalSummary(options={**asdict(options), "shape": asdict(options.shape)})
    resume = latest_checkpoint(out_dir)
    loop = _loop(out_dir, options, tokenizer, group, resume, summary)
    step = 0 if resume is None else _resume(loop, resume, summary)
    summary.parameters = _saved_parameters(loop.model, loop.vocab_rows)
    summary.vocabulary = len(tokenizer)
    loop.objective = _objective(options, tokenizer)
    _compile(loop)
    schedule = checkpoint_steps(options.steps, options.checkpoints)
    saves = set(schedule)
    if options.save_every:
        saves.update(range(options.save_every, options.steps, options.save_every))
    per_step = options.tokens_per_step
    # The whole loss log, one line an entry (the run's row keeps a thinned one).
    loss_file = _loss_file(out_dir, summary.log) if loop.rank == 0 else None
    loss_value = math.nan
    while step < options.steps:
        loss_value, lr = _train_step(loop, step)
        step += 1
        entry = {"step": step, "tokens": step * per_step, "loss": round(loss_value, 6), "lr": lr}
        summary.log.append(entry)
        _write_entry(loss_file, entry)
        if on_step is not None:
            on_step({**entry, "steps": options.steps, "tokens_total": options.steps * per_step})
        if step in saves and loop.rank == 0:
            point = _save_checkpoint(loop, summary, step, loss_value, step in schedule, loss_file)
            if on_checkpoint is not None:
                on_checkpoint(point)
        if _stops(loop, step, step in saves, should_stop):
            summary.stopped = True
            break
    if loss_file is not None:
        loss_file.close()
    if loop.rank != 0:
        return None
    return _finish(loop, summary, step, loss_value, started)


def _loop(
    out_dir: Path,
    options: CausalOptions,
    tokenizer: Any,
    group: _Group | None,
    resume: Path | None,
    summary: CausalSummary,
) -> _Loop:
    """The token blocks (their counts into `summary`), and, seeded by the options, the
    model (the last checkpoint's, a base model or a new one) on its device with its
    optimizer, learning-rate schedule and block order."""
    data_dir = out_dir / DATA_DIR
    train_file, valid_file = data_dir / "train.bin", data_dir / "validation.bin"
    train_blocks = _blocks(train_file, options.shape.context)
    valid_blocks = _blocks(valid_file, options.shape.context)
    summary.training_tokens = int(train_file.stat().st_size // 4)
    summary.validation_tokens = int(valid_file.stat().st_size // 4)
    torch.manual_seed(options.seed)
    random.seed(options.seed)
    np.random.seed(options.seed % 2**32)
    device = torch.device(
        f"cuda:{group.rank}" if group and options.device == "cuda" else options.device
    )
    if resume is not None:
        model = _model_class(options).from_pretrained(resume, dtype=torch.float32)
        vocab_rows = _rows(model)
    elif options.base_model:
        # An artifact: source (a model of the site) is fetched into this worker's cache.
        model = _base_model(sources.resolve(options.base_model), tokenizer)
        vocab_rows = _rows(model)
    else:
        model = build_model(options.shape, tokenizer)
        vocab_rows = len(tokenizer)
    _pad_vocab(model, vocab_rows)
    model.to(device)
    model.train()
    parallel = None
    if group:
        parallel = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[device.index] if device.type == "cuda" else None
        )
    optimizer = _optimizer(model, options)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda s: lr_factor(s, options))
    return _Loop(
        options=options,
        out_dir=out_dir,
        tokenizer=tokenizer,
        group=group,
        device=device,
        model=model,
        trained=model if parallel is None else parallel,
        parallel=parallel,
        vocab_rows=vocab_rows,
        optimizer=optimizer,
        scheduler=scheduler,
        order=BlockOrder(len(train_blocks), options.seed),
        train_blocks=train_blocks,
        valid_blocks=valid_blocks,
    )


def _resume(loop: _Loop, resume: Path, summary: CausalSummary) -> int:
    """The checkpoint's training state restored (optimizer, schedule, random states,
    data position, log): the step it was written at."""
    state = load_training_state(resume)
    loop.optimizer.load_state_dict(state["optimizer"])
    loop.scheduler.load_state_dict(state["scheduler"])
    _set_rng_state(state["rng"])
    loop.order.position = int(state["data_position"])
    summary.log = list(state["log"])
    summary.checkpoints = list(state["checkpoints"])
    summary.resumed_from_step = int(state["step"])
    return summary.resumed_from_step


def _saved_parameters(model: Any, vocab_rows: int) -> int:
    """The parameters of the model that is saved: not the unused rows of the embedding."""
    unused = sum(
        (int(w.shape[0]) - vocab_rows) * (w.numel() // int(w.shape[0]))
        for w in _vocab_tensors(model)
    )
    return sum(p.numel() for p in model.parameters()) - unused


def _compile(loop: _Loop) -> None:
    """With `compile`, the loss of what trains compiled. `model` itself is what is saved
    and evaluated (another batch shape would compile again). Every micro-batch has the
    same shape, so the forward and backward compile once per process."""
    if not loop.options.compiles:
        return
    objective, trained, rows = loop.objective, loop.trained, loop.vocab_rows

    def training_loss(*tensors: torch.Tensor) -> torch.Tensor:
        return objective.loss(trained, *tensors, rows)

    loop.compiled.append(torch.compile(training_loss))


def _train_step(loop: _Loop, step: int) -> tuple[float, float]:
    """One optimizer step (the `step`-th, from 0): the step's loss, over every rank, and
    the learning rate it trained with."""
    options, rank, size = loop.options, loop.rank, loop.size
    # Each rank takes every `size`-th of the step's micro-batches, from the one block order
    # all ranks follow: the step sees the same blocks however many ranks share it.
    share = options.accumulation // size
    blocks = loop.order.take(options.accumulation * options.micro_batch)
    mine = blocks.reshape(options.accumulation, options.micro_batch)[rank::size]
    # The loss stays on the device until the step ends: one synchronisation a step.
    summed = torch.zeros((), device=loop.device)
    for index, chosen in enumerate(mine):
        # The micro-batch's place in the step, whichever rank runs it: the masks of a
        # masked model depend on it and the seed only.
        arrays = loop.objective.arrays(loop.train_blocks[chosen], (step, rank + index * size))
        tensors = [torch.from_numpy(a).to(loop.device, non_blocking=True) for a in arrays]
        # Gradients are averaged across ranks once a step, in the last backward pass.
        waits = index < share - 1
        parallel = loop.parallel
        with parallel.no_sync() if parallel is not None and waits else contextlib.nullcontext():
            loss = loop.micro_loss(*tensors) / share
            loss.backward()
        summed += loss.detach().float()
    if loop.group:
        # Every micro-batch has the same number of tokens, so the mean of the ranks'
        # means is the mean over the whole step's batch.
        torch.distributed.all_reduce(summed)
        summed /= size
    total = float(summed)
    if options.grad_clip > 0:
        torch.nn.utils.clip_grad_norm_(loop.model.parameters(), options.grad_clip)
    lr = loop.optimizer.param_groups[0]["lr"]
    loop.optimizer.step()
    loop.scheduler.step()
    loop.optimizer.zero_grad(set_to_none=True)
    return total, lr


def _save_checkpoint(
    loop: _Loop,
    summary: CausalSummary,
    step: int,
    train_loss: float,
    scheduled: bool,
    loss_file: Any,
) -> Checkpoint:
    """Evaluate, save the checkpoint's folder (its training state last), and apply the
    retention; the checkpoint as the callback hears of it."""
    options, out_dir = loop.options, loop.out_dir
    tokens = step * options.tokens_per_step
    valid_loss = _evaluate(
        loop.model, loop.valid_blocks, options, loop.autocast, loop.vocab_rows, loop.objective
    )
    summary.log.append({"step": step, "tokens": tokens, "validation_loss": valid_loss})
    _write_entry(loss_file, summary.log[-1])
    folder = out_dir / f"{CHECKPOINT_PREFIX}{tokens}"
    record = {
        "step": step,
        "tokens": tokens,
        "folder": folder.name,
        "train_loss": round(train_loss, 6),
        "validation_loss": valid_loss,
        "scheduled": scheduled,
    }
    summary.checkpoints.append(record)
    _save_folder(loop.model, loop.tokenizer, folder, loop.vocab_rows)
    state = {
        "optimizer": loop.optimizer.state_dict(),
        "scheduler": loop.scheduler.state_dict(),
        "rng": _rng_state(),
        "data_position": loop.order.position,
        "step": step,
        "log": summary.log,
        "checkpoints": summary.checkpoints,
    }
    # The state last: a folder without it is not a checkpoint to resume from.
    torch.save(state, folder / f"{STATE_NAME}.part")
    os.replace(folder / f"{STATE_NAME}.part", folder / STATE_NAME)
    _prune_states(out_dir, options.keep_states)
    size_on_disk = record["bytes"] = folder_bytes(folder)
    removed = retain_checkpoints(out_dir, summary.checkpoints, options)
    return Checkpoint(
        step, tokens, folder, train_loss, valid_loss, size_on_disk, scheduled, removed
    )


def _stops(loop: _Loop, step: int, saved: bool, should_stop: Callable[[], bool] | None) -> bool:
    """Whether the training stops after `step`: at `stop_after_step`'s checkpoint, or
    when `should_stop` says so; on several ranks, rank 0's decision for all."""
    options = loop.options
    stop = False
    if saved and options.stop_after_step and options.stop_after_step <= step < options.steps:
        stop = True
    elif should_stop is not None and should_stop():
        stop = True
    if loop.group:
        # Rank 0's decision: every rank stops at the same step.
        flag = torch.tensor([int(stop)], device=loop.device)
        torch.distributed.broadcast(flag, src=0)
        stop = bool(flag.item())
    return stop


def _finish(
    loop: _Loop, summary: CausalSummary, step: int, loss_value: float, started: float
) -> CausalSummary:
    """The summary completed and written to INFO_NAME, and, unless stopped early, the
    finished model saved in the folder itself."""
    options, out_dir = loop.options, loop.out_dir
    summary.steps_done = step
    summary.tokens_seen = step * options.tokens_per_step
    summary.final_loss = None if math.isnan(loss_value) else round(loss_value, 6)
    evaluations = [e for e in summary.log if "validation_loss" in e]
    summary.final_validation_loss = evaluations[-1]["validation_loss"] if evaluations else None
    summary.seconds = round(time.time() - started, 3)
    if not summary.stopped:
        _save_folder(loop.model, loop.tokenizer, out_dir, loop.vocab_rows)
    (out_dir / INFO_NAME).write_text(
        json.dumps({"kind": options.objective, **asdict(summary)}, indent=2, default=str) + "\n",
        encoding="utf-8",
    )
    return summary


def _loss_file(out_dir: Path, log: list[dict[str, Any]]) -> Any:
    """`LOSS_FILE` in `out_dir` written afresh with `log` (the entries a resumed run
    keeps: none, or those up to its checkpoint), open to append the rest a line each."""
    handle = (out_dir / LOSS_FILE).open("w", encoding="utf-8", buffering=1)
    handle.writelines(json.dumps(entry) + "\n" for entry in log)
    return handle


def _write_entry(handle: Any, entry: dict[str, Any]) -> None:
    if handle is not None:
        handle.write(json.dumps(entry) + "\n")


# --- several devices ----------------------------------------------------------------------

# How long the process that started a training on several devices waits for a report
# before it looks at its processes and at `should_stop` again.
POLL_SECONDS = 0.2


def options_from_dict(raw: dict[str, Any], objective: str) -> CausalOptions:
    """The options that `asdict` wrote of a training of `objective` ("causal" or
    "masked"): the ranks of a training on several devices read theirs from the job's
    JSON."""
    return options_class(objective)(**{**raw, "shape": ModelShape(**raw["shape"])})


def _launch_command(size: int, job_dir: Path) -> list[str]:
    """torch's elastic launcher (torchrun) on this machine: `size` ranks of
    evaluations.training.ranks, a rendezvous of its own on a free local port, and no
    restart (a failed rank fails the training, whose retry resumes from its checkpoint)."""
    return [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        f"--nproc-per-node={size}",
        "--max-restarts=0",
        "--monitor-interval=0.2",
        "-m",
        "evaluations.training.ranks",
        str(job_dir),
    ]


class _ReportReader:
    """What the ranks have reported so far (ranks.Reports' file), read a whole line at a
    time as it grows."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def new(self) -> list[dict[str, Any]]:
        if not self.path.is_file():
            return []
        with self.path.open("rb") as handle:
            handle.seek(self._offset)
            data = handle.read()
        whole = data[: data.rfind(b"\n") + 1]
        self._offset += len(whole)
        return [json.loads(line) for line in whole.splitlines() if line.strip()]


def _relay(
    message: dict[str, Any],
    outcome: dict[str, Any],
    on_step: Callable[[dict[str, Any]], None] | None,
    on_checkpoint: Callable[[Checkpoint], None] | None,
) -> None:
    kind, body = message["kind"], message["body"]
    if kind == "step" and on_step is not None:
        on_step(body)
    elif kind == "checkpoint" and on_checkpoint is not None:
        on_checkpoint(Checkpoint(**{**body, "path": Path(body["path"])}))
    elif kind == "summary":
        outcome["summary"] = CausalSummary(**body)
    elif kind == "error":
        outcome["errors"].append(tuple(body))


def _write_job(
    job_dir: Path, out_dir: Path, options: CausalOptions, tokenizer: Any, started: float
) -> None:
    tokenizer.save_pretrained(job_dir / "tokenizer")
    job = {
        "out_dir": str(out_dir),
        "options": asdict(options),
        "objective": options.objective,
        "started": started,
        "threads": torch.get_num_threads(),
        "watch": os.getpid(),
    }
    (job_dir / "job.json").write_text(json.dumps(job), encoding="utf-8")


def _train_parallel(
    out_dir: Path,
    options: CausalOptions,
    tokenizer: Any,
    started: float,
    *,
    on_step: Callable[[dict[str, Any]], None] | None,
    on_checkpoint: Callable[[Checkpoint], None] | None,
    should_stop: Callable[[], bool] | None,
) -> CausalSummary:
    """Train in `options.devices` processes, one a device, started by torch's elastic
    launcher (torchrun, as a process of its own: a Celery pool process, which
    multiprocessing would not let start children, starts it as any program) and joined by
    torch.distributed (NCCL on GPUs, gloo on the CPU) with the model in
    DistributedDataParallel. This process relays rank 0's reports to the callbacks, asks
    `should_stop` and passes a stop on (a file the ranks look for); a rank that fails
    ends the others and the launcher, and its error is raised here."""
    import tempfile

    outcome: dict[str, Any] = {"summary": None, "errors": []}
    with tempfile.TemporaryDirectory(prefix="gym-ddp-") as folder:
        job_dir = Path(folder)
        _write_job(job_dir, out_dir, options, tokenizer, started)
        stop = job_dir / "STOP"
        reader = _ReportReader(job_dir / "reports.jsonl")
        env = {
            **os.environ,
            "OMP_NUM_THREADS": str(max(1, torch.get_num_threads() // options.devices)),
        }
        with (job_dir / "launcher.log").open("wb") as log:
            launcher = subprocess.Popen(
                _launch_command(options.devices, job_dir),
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )
        try:
            while True:
                # A stop asked before the start ends the training after its first step.
                if should_stop is not None and not stop.exists() and should_stop():
                    stop.touch()
                ended = launcher.poll() is not None
                for message in reader.new():
                    _relay(message, outcome, on_step, on_checkpoint)
                if ended:
                    break
                time.sleep(POLL_SECONDS)
        finally:
            # A callback that raised, or an interrupt: the launcher ends its ranks with it.
            if launcher.poll() is None:
                launcher.terminate()
                try:
                    launcher.wait(30)
                except subprocess.TimeoutExpired:
                    launcher.kill()
                    launcher.wait()
        failure = (
            "" if launcher.returncode == 0 else _launcher_failure(job_dir, launcher.returncode)
        )
    if failure or outcome["summary"] is None:
        raise _process_error(options.devices, outcome["errors"], failure or "no summary")
    return outcome["summary"]


def _launcher_failure(job_dir: Path, code: int) -> str:
    """How the launcher ended, with the last lines it printed."""
    lines = (job_dir / "launcher.log").read_text(errors="replace").strip().splitlines()
    tail = " | ".join(line.strip() for line in lines[-3:])
    how = f"signal {-code}" if code < 0 else f"code {code}"
    return f"the launcher ended with {how}" + (f" ({tail[:500]})" if tail else "")


def _process_error(size: int, errors: list[tuple[int, bool, str, str]], failure: str) -> Exception:
    """The error to raise for a training on several devices that failed: the first
    error a process reported (a CausalTrainingError as it is), else how it ended."""
    if errors:
        rank, known, message, trace = errors[0]
        if known:
            return CausalTrainingError(message.split(": ", 1)[1])
        error = TrainingProcessError(f"training process {rank} of {size} failed: {message}")
        error.add_note(trace)
        return error
    return TrainingProcessError(f"the training processes ended without a result: {failure}")


def remove_training_data(out_dir: Path) -> None:
    """The tokenized corpus (`data/`) is only needed while training."""
    shutil.rmtree(out_dir / DATA_DIR, ignore_errors=True)
