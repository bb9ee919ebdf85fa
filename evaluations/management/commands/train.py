from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from evaluations.management.standalone import StandaloneCommand
from evaluations.training import causal, ngram
from evaluations.training.data import corpus_file, with_validation_file
from suites.corpora.reading import CorpusError

KINDS = ("ngram", "causal", "masked")
# Options of --kind masked only.
MASKING_FLAGS = ("mask_probability", "whole_word_masking")


class Command(StandaloneCommand):
    help = (
        "Train a language model on a corpus file (NLPScholar TSV with a 'text' column, or "
        "plain text with one sequence per line, either gzipped), with the same code as a "
        "training run's worker. --kind ngram writes OUT/model.arpa (interpolated modified "
        "Kneser-Ney); --kind causal writes a save_pretrained folder, and so does --kind masked "
        "(a BERT-style model, BERT's masked-LM objective). All are read as they are by "
        "`manage.py score --model`. A held-out share of the lines (--validation-"
        "fraction, default 0.01, at most 10,000 lines) is left out of training."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--corpus", required=True, help="the corpus file")
        parser.add_argument("--kind", required=True, choices=KINDS)
        parser.add_argument("--out", required=True, help="the folder to write the model to")
        parser.add_argument("--order", type=int, default=3, help="n-gram order, 2-6 (3)")
        parser.add_argument(
            "--min-count",
            type=int,
            default=1,
            help="n-gram vocabulary: words seen fewer times become <unk> (1: keep all)",
        )
        parser.add_argument(
            "--memory-mb",
            type=int,
            default=None,
            help="n-gram memory budget in MB: above it, count in sorted runs on disk "
            "(default: a quarter of the machine's memory)",
        )
        parser.add_argument(
            "--disk-mb",
            type=int,
            default=None,
            help="n-gram: a bound on the temporary disk in MB; the run stops rather than "
            "pass it (default: none but the free space)",
        )
        parser.add_argument("--validation-fraction", type=float, default=0.01)
        parser.add_argument("--validation-max", type=int, default=10_000)
        parser.add_argument("--validation-seed", type=int, default=0)
        parser.add_argument(
            "--validation-file",
            help="a second corpus file whose every line gives the validation loss; the "
            "corpus is then trained on whole",
        )
        self.add_causal_arguments(parser)

    def add_causal_arguments(self, parser: CommandParser) -> None:
        """Options of --kind causal and masked (see evaluations.training.causal)."""
        self.add_shape_arguments(parser)
        self.add_loop_arguments(parser)

    def add_shape_arguments(self, parser: CommandParser) -> None:
        """The model's shape and tokenizer, and masking (--kind masked)."""
        parser.add_argument(
            "--preset",
            choices=[*causal.PRESETS, *causal.MASKED_PRESETS, "custom"],
            help="model shape: tiny (tests; the default), small (GPT-2 small), their -llama "
            "twins, or custom (GPT-2 small changed by --arch/--layers/--width/--heads/"
            "--context/--vocab); --kind masked: tiny-bert (the default), small-bert (BERT-base) "
            "or custom (BERT-base changed)",
        )
        parser.add_argument("--arch", choices=causal.ARCHITECTURES)
        parser.add_argument("--layers", type=int)
        parser.add_argument("--width", type=int)
        parser.add_argument("--heads", type=int)
        parser.add_argument("--context", type=int)
        parser.add_argument("--vocab", type=int, help="vocabulary size of a trained tokenizer")
        parser.add_argument(
            "--from-model",
            metavar="DIR_OR_NAME",
            help="continued pre-training: train this causal model further (a model folder, "
            "or the name of a registered model), with its own tokenizer and shape",
        )
        parser.add_argument(
            "--tokenizer",
            choices=("bpe", "unigram", "wordpiece"),
            help="the tokenizer trained on the corpus: byte-level BPE (the default) or Unigram; "
            "--kind masked: byte-level BPE (the default) or WordPiece (BERT's)",
        )
        parser.add_argument(
            "--mask-probability",
            type=float,
            help="--kind masked: the share of tokens chosen for prediction (0.15); a chosen "
            "token is [MASK] 80%% of the time, a random token 10%%, itself 10%%",
        )
        parser.add_argument(
            "--whole-word-masking",
            action="store_true",
            help="--kind masked: choose whole words, all their tokens at once",
        )
        parser.add_argument(
            "--tokenizer-from",
            metavar="DIR_OR_NAME",
            help="use this model's tokenizer (a folder or a registered model's name) instead "
            "of training one",
        )

    def add_loop_arguments(self, parser: CommandParser) -> None:
        """The training loop, its checkpoints, devices and where it starts."""
        parser.add_argument("--steps", type=int, default=100, help="optimizer steps (100)")
        parser.add_argument(
            "--batch-tokens",
            type=int,
            default=0,
            help="tokens per optimizer step, reached by gradient accumulation (default: "
            "one micro-batch)",
        )
        parser.add_argument("--micro-batch", type=int, default=8, help="sequences per pass (8)")
        parser.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
        parser.add_argument("--warmup-steps", type=int, default=-1, help="default: 5%% of steps")
        parser.add_argument("--weight-decay", type=float, default=0.1)
        parser.add_argument("--checkpoints", type=int, default=8, help="log-spaced (8)")
        parser.add_argument(
            "--keep-states",
            type=int,
            default=0,
            help="keep the optimizer/training state of the last N checkpoints only (0: all); "
            "every checkpoint keeps its weights",
        )
        parser.add_argument(
            "--save-every",
            type=int,
            default=0,
            help="also save a checkpoint every N steps, to resume from (0: the schedule only)",
        )
        parser.add_argument(
            "--retention",
            choices=causal.RETENTIONS,
            default="all",
            help="checkpoint folders kept: all, those on the log-spaced schedule, or the "
            "last --keep-last",
        )
        parser.add_argument("--keep-last", type=int, default=0, help="with --retention last")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--device", default="cpu", help="cpu or cuda (bf16 autocast)")
        parser.add_argument(
            "--devices",
            default="1",
            help="data parallelism: train in N processes, one a device (cuda: GPUs 0..N-1; "
            "cpu: N CPU processes), or 'all' with --device cuda: every visible GPU (1)",
        )
        parser.add_argument(
            "--compile",
            choices=causal.COMPILE_MODES,
            default="auto",
            help="torch.compile the model: auto compiles on a GPU only",
        )
        parser.add_argument(
            "--fresh",
            action="store_true",
            help="start afresh in --out: delete the checkpoints, token files and logs an "
            "earlier training left there (without it, a folder whose training had other "
            "inputs is refused, and one with the same inputs is resumed)",
        )
        parser.add_argument("--stop-after-step", type=int, default=0, help=argparse.SUPPRESS)

    def handle(self, *args: Any, **options: Any) -> None:
        path = Path(options["corpus"])
        if not path.is_file():
            raise CommandError(f"--corpus {path}: no such file")
        out = Path(options["out"])
        self.fresh = bool(options["fresh"])
        try:
            source = corpus_file(
                path,
                fraction=options["validation_fraction"],
                maximum=options["validation_max"],
                seed=options["validation_seed"],
            )
        except CorpusError as exc:
            raise CommandError(f"{path}, {exc}") from None
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        if options["validation_file"]:
            validation = Path(options["validation_file"])
            if not validation.is_file():
                raise CommandError(f"--validation-file {validation}: no such file")
            try:
                source = with_validation_file(source, validation)
            except CorpusError as exc:
                raise CommandError(f"--validation-file {validation}, {exc}") from None
        kind = options["kind"]
        for flag in MASKING_FLAGS if kind != "masked" else ():
            if options[flag] not in (None, False):
                raise CommandError(
                    f"--{flag.replace('_', '-')} is an option of --kind masked, not of {kind}"
                )
        if kind == "ngram":
            for flag in ("from_model", "tokenizer", "tokenizer_from"):
                if options[flag]:
                    raise CommandError(
                        f"--{flag.replace('_', '-')} is an option of --kind causal; an n-gram "
                        "model counts words"
                    )
            self.train_ngram(source, out, options)
        else:
            self.train_causal(source, out, options)

    def train_ngram(self, source: Any, out: Path, options: dict[str, Any]) -> None:
        started = time.perf_counter()

        def progress(stage: str, amount: int) -> None:
            self.progress_line(f"{stage}: {amount:,}")

        try:
            summary = ngram.train_ngram(
                source.training(),
                out,
                order=options["order"],
                min_count=options["min_count"],
                memory_mb=options["memory_mb"],
                disk_mb=options["disk_mb"],
                progress=progress,
                heldout=source.validation(),
            )
        except ngram.NgramTrainingError as exc:
            raise CommandError(str(exc)) from None
        except CorpusError as exc:
            raise CommandError(f"{source.path}, {exc}") from None
        counts = ", ".join(f"{n:,} {k}-grams" for k, n in summary.ngrams.items())
        self.stdout.write(
            f"{out / ngram.ARPA_NAME}: order {summary.order}, {summary.sentences:,} "
            f"sentences, {summary.words:,} words, vocabulary {summary.vocabulary:,} "
            f"({summary.unknown_types:,} word types as <unk>), {counts}; "
            f"{0 if source.validation_from else source.validation_lines:,} lines held out; "
            f"{time.perf_counter() - started:.1f} s"
        )
        if summary.heldout:
            orders = ", ".join(f"{k}: {v:,}" for k, v in summary.heldout["by_order"].items())
            self.stdout.write(
                f"held-out perplexity {summary.heldout['perplexity']:,} on "
                f"{summary.heldout['words']:,} words ({summary.heldout['oov']:,} out of the "
                f"vocabulary, scored as <unk>); by order {orders}"
            )
        self.stdout.write(
            f"counted {summary.counting} (budget {summary.memory_mb:,} MB; {summary.runs:,} "
            f"sorted runs; temporary disk at peak {summary.temp_disk_peak_bytes / 1e6:,.1f} MB)"
        )
        for note in summary.discount_notes:
            self.stdout.write(f"discount fallback: {note}")

    def model_source(self, given: str, flag: str, purpose: str) -> str:
        """The folder of `given`: a model folder, or a registered model's source."""
        path = Path(given)
        if path.is_dir():
            return str(path)
        if path.is_file():
            raise CommandError(
                f"--{flag} {given}: a file, not a model folder (an n-gram model cannot be "
                f"{'trained further' if purpose == 'base' else 'a tokenizer'})"
            )
        from evaluations.models import LanguageModel
        from evaluations.training.services import model_to_train_problem

        model = LanguageModel.objects.filter(name=given).first()
        if model is None:
            raise CommandError(f"--{flag} {given}: no such folder, and no registered model")
        problem = model_to_train_problem(model, purpose=purpose)
        if problem:
            raise CommandError(f"--{flag} {given}: {problem}")
        return model.source

    def devices(self, given: str, device: str) -> int:
        if given == "all":
            if not device.startswith("cuda"):
                raise causal.CausalTrainingError("--devices all counts GPUs: give --device cuda")
            import torch

            return max(1, torch.cuda.device_count())
        try:
            return int(given)
        except ValueError:
            raise causal.CausalTrainingError(
                f"--devices {given}: give a number of devices or 'all'"
            ) from None

    def train_causal(self, source: Any, out: Path, options: dict[str, Any]) -> None:
        """--kind causal, or masked (the same training, BERT's objective)."""
        base, tokenizer_source = self.model_sources(options)
        try:
            settings = self.causal_settings(options, base, tokenizer_source)
        except causal.CausalTrainingError as exc:
            raise CommandError(str(exc)) from None

        def progress(entry: dict[str, Any]) -> None:
            self.progress_line(f"step {entry['step']}/{entry['steps']} loss {entry['loss']:.4f}")

        try:
            summary = causal.train_causal(
                source.training,
                source.validation,
                out,
                settings,
                on_step=progress,
                on_checkpoint=self.checkpoint_line,
                fresh=bool(self.fresh),
            )
        except causal.CausalTrainingError as exc:
            raise CommandError(str(exc)) from None
        except causal.TrainingProcessError as exc:
            raise CommandError(f"{exc}\n{''.join(getattr(exc, '__notes__', []))}") from None
        except CorpusError as exc:
            raise CommandError(f"{source.path}, {exc}") from None
        self.end_progress_line()
        self.summary_line(summary, out)

    def model_sources(self, options: dict[str, Any]) -> tuple[str, str]:
        """The folders of --from-model (the base model) and --tokenizer-from ("" for
        either not given), the flags that go with them checked."""
        base = tokenizer_source = ""
        if options["from_model"] and options["kind"] == "masked":
            raise CommandError(
                "--from-model is an option of --kind causal: continued pre-training trains a "
                "causal model, and a masked one starts afresh"
            )
        if options["from_model"]:
            if options["tokenizer"] or options["tokenizer_from"]:
                raise CommandError(
                    "--from-model trains with the model's own tokenizer: leave --tokenizer "
                    "and --tokenizer-from out"
                )
            base = self.model_source(options["from_model"], "from-model", "base")
        if options["tokenizer_from"]:
            if options["tokenizer"]:
                raise CommandError("give --tokenizer or --tokenizer-from, not both")
            tokenizer_source = self.model_source(options["tokenizer_from"], "tokenizer-from", "")
        return base, tokenizer_source

    def causal_settings(
        self, options: dict[str, Any], base: str, tokenizer_source: str
    ) -> causal.CausalOptions:
        """The training's options from the command's, checked (CausalTrainingError)."""
        kind = options["kind"]
        masking: dict[str, Any] = {}
        if kind == "masked":
            masking["whole_word_masking"] = options["whole_word_masking"]
            if options["mask_probability"] is not None:
                masking["mask_probability"] = options["mask_probability"]
        settings = causal.options_class(kind)(
            shape=self.causal_shape(options, base, tokenizer_source),
            steps=options["steps"],
            batch_tokens=options["batch_tokens"],
            micro_batch=options["micro_batch"],
            learning_rate=options["lr"],
            warmup_steps=options["warmup_steps"],
            weight_decay=options["weight_decay"],
            seed=options["seed"],
            device=options["device"],
            devices=self.devices(options["devices"], options["device"]),
            compile=options["compile"],
            checkpoints=options["checkpoints"],
            keep_states=options["keep_states"],
            stop_after_step=options["stop_after_step"],
            base_model=base,
            tokenizer="model" if base or tokenizer_source else options["tokenizer"] or "bpe",
            tokenizer_source=tokenizer_source,
            save_every=options["save_every"],
            retention=options["retention"],
            keep_last=options["keep_last"],
            **masking,
        )
        settings.check()
        return settings

    def causal_shape(
        self, options: dict[str, Any], base: str, tokenizer_source: str
    ) -> causal.ModelShape:
        """The base model's shape (its context may shorten), or the preset's with the
        flags that change it and a tokenizer's model's vocabulary."""
        kind = options["kind"]
        if base:
            shaped = [k for k in ("arch", "layers", "width", "heads", "vocab") if options[k]]
            if shaped:
                raise causal.CausalTrainingError(
                    f"--from-model fixes the shape: leave out --{', --'.join(shaped)}"
                )
            return causal.base_shape(base, options["context"])
        shape = causal.shape_for(
            options["preset"] or ("tiny-bert" if kind == "masked" else "tiny"),
            kind,
            arch=options["arch"],
            layers=options["layers"],
            width=options["width"],
            heads=options["heads"],
            context=options["context"],
            vocab=options["vocab"],
        )
        if tokenizer_source:
            loaded = causal.model_tokenizer(tokenizer_source, kind)
            shape = replace(shape, vocab=len(loaded))
        return shape

    def checkpoint_line(self, point: causal.Checkpoint) -> None:
        shown = "n/a" if point.validation_loss is None else f"{point.validation_loss:.4f}"
        removed = f"; removed {', '.join(point.removed)}" if point.removed else ""
        self.stdout.write(
            f"{point.path}: step {point.step}, {point.tokens:,} tokens, train loss "
            f"{point.train_loss:.4f}, validation loss {shown}{removed}"
        )

    def summary_line(self, summary: causal.CausalSummary, out: Path) -> None:
        resumed = (
            f" (resumed at step {summary.resumed_from_step})" if summary.resumed_from_step else ""
        )
        where = "stopped early" if summary.stopped else f"model in {out}"
        self.stdout.write(
            f"{where}: {summary.steps_done} steps{resumed}, {summary.tokens_seen:,} tokens, "
            f"{summary.parameters:,} parameters, final loss {summary.final_loss}, "
            f"validation loss {summary.final_validation_loss}; {summary.seconds:.1f} s"
        )
