"""The options of causal training: presets, shapes and checks, without torch, so that
the web process can check a request. `evaluations.training.causal` trains with them."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

ARCHITECTURES = ("gpt2", "llama")


class CausalTrainingError(ValueError):
    """The options or the corpus cannot give a model; the message says why."""


@dataclass(frozen=True)
class ModelShape:
    arch: str  # "gpt2" or "llama"
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


@dataclass
class CausalOptions:
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

    def check(self) -> None:
        s = self.shape
        problems = []
        if s.arch not in ARCHITECTURES:
            problems.append(f"architecture {s.arch!r} is not one of {', '.join(ARCHITECTURES)}")
        if min(s.layers, s.width, s.heads, s.context) < 1:
            problems.append("layers, width, heads and context must be 1 or more")
        elif s.width % s.heads:
            problems.append(f"the width ({s.width}) must be a multiple of the heads ({s.heads})")
        if s.vocab < 260:
            problems.append(f"the vocabulary must hold the 256 bytes and more; got {s.vocab}")
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
        if problems:
            raise CausalTrainingError("; ".join(problems))

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


def shape_for(preset: str, **overrides: int | str | None) -> ModelShape:
    """A preset's shape ("custom": GPT-2 small's) with the given fields replaced."""
    if preset != "custom" and preset not in PRESETS:
        raise CausalTrainingError(
            f"unknown preset {preset!r}; choose one of {', '.join([*PRESETS, 'custom'])}"
        )
    shape = PRESETS.get(preset, PRESETS["small"])
    changes = {k: v for k, v in overrides.items() if v is not None}
    return replace(shape, **changes)  # type: ignore[arg-type]
