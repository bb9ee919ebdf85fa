"""The training form: its fields in groups, one fieldset each (`GROUPS`). A group for
one kind of model names it (`kinds`), and the page shows it only while that kind is
chosen (static/js/training-form.js; without JavaScript every group shows, each with its
legend). A kind's options are one more group; a field or group that serves several kinds
names them all."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django import forms

from evaluations.models import LanguageModel
from evaluations.subsets import MAX_SEED, MAX_SIZE, Subset
from evaluations.training.models import TrainingRun
from evaluations.training.options import ARCHITECTURES, MASK_PROBABILITY, MASKED_PRESETS, PRESETS
from suites.corpora.models import Corpus
from suites.models import MinimalPairSet, ProbingTask, Suite, Tag

# The preset whose shape the form's shape fields change.
CUSTOM = "custom"
SHAPE_FIELDS = ("layers", "width", "heads", "context", "vocab", "arch")


@dataclass(frozen=True)
class Group:
    legend: str
    fields: tuple[str, ...]
    kinds: str = ""  # the kinds of model it is for, space-separated ("": every kind)
    preset: str = ""  # shown only with this preset
    help: str = ""


GROUPS = (
    Group("Corpus and model", ("corpus", "name", "kind")),
    Group("n-gram model", ("order", "min_count", "memory_mb", "disk_mb"), kinds="ngram"),
    Group(
        "Transformer and tokenizer",
        ("preset", "base_model", "tokenizer", "tokenizer_model", "validation_corpus"),
        kinds="causal masked",
    ),
    Group("Masking", ("mask_probability", "whole_word_masking"), kinds="masked"),
    Group(
        "Custom shape",
        SHAPE_FIELDS,
        kinds="causal masked",
        preset=CUSTOM,
        help="The custom preset is GPT-2 small (small-bert for a masked model) with these "
        "changes; a blank field keeps its value.",
    ),
    Group(
        "Optimisation",
        ("steps", "batch_tokens", "micro_batch", "learning_rate", "warmup_steps", "weight_decay", "seed"),
        kinds="causal masked",
    ),
    Group(
        "Checkpoints",
        ("checkpoints", "save_every", "retention", "keep_last", "keep_states"),
        kinds="causal masked",
    ),
    Group(
        "Evaluate the checkpoints on",
        ("suites", "tags", "pair_sets", "probing_tasks", "threshold"),
        help="Every checkpoint, and the finished model, is evaluated on these (learning "
        "curves). The corpus check below says how many of their sentences the corpus holds.",
    ),
)  # fmt: skip
# Single fields for only some kinds, inside a group for every kind.
FIELD_KINDS = {"probing_tasks": "causal masked", "base_model": "causal"}


class TrainingRequestForm(forms.Form):
    corpus = forms.ModelChoiceField(
        queryset=Corpus.objects.order_by("name"), to_field_name="name", empty_label=None
    )
    name = forms.CharField(
        max_length=80, help_text="The model's name; checkpoints are <name>@<tokens>."
    )
    kind = forms.ChoiceField(choices=TrainingRun.Kind.choices, initial="causal")
    validation_corpus = forms.ModelChoiceField(
        queryset=Corpus.objects.order_by("name"),
        to_field_name="name",
        required=False,
        help_text="Validate on this corpus's text instead of the held-out lines (then every "
        "line of the training corpus is trained on).",
    )
    order = forms.IntegerField(initial=3, min_value=2, max_value=6, help_text="n-gram order")
    min_count = forms.IntegerField(
        initial=1, min_value=1, help_text="n-gram: words seen fewer times become <unk>"
    )
    memory_mb = forms.IntegerField(
        required=False,
        min_value=1,
        label="Memory budget (MB)",
        help_text="n-gram: above it, counts go to sorted runs on disk (blank: a quarter of "
        "the worker's memory)",
    )
    disk_mb = forms.IntegerField(
        required=False,
        min_value=1,
        label="Temporary disk bound (MB)",
        help_text="n-gram: the run stops rather than pass it (blank: only the free space)",
    )
    preset = forms.ChoiceField(
        choices=[(p, p) for p in [*PRESETS, *MASKED_PRESETS, "custom"]],
        initial="tiny",
        help_text="tiny: for trying; small: GPT-2 small (124M); -llama: the Llama style; "
        "-bert: masked models' (small-bert: BERT-base's shape)",
    )
    base_model = forms.ModelChoiceField(
        queryset=LanguageModel.objects.filter(kind=LanguageModel.Kind.CAUSAL).order_by("name"),
        to_field_name="name",
        required=False,
        label="Continue from",
        help_text="Continued pre-training: train this causal model further, with its own "
        "tokenizer and shape (the preset and tokenizer are then ignored).",
    )
    tokenizer = forms.ChoiceField(
        choices=[
            ("bpe", "byte-level BPE trained on the corpus"),
            ("unigram", "Unigram trained on the corpus"),
            ("wordpiece", "WordPiece trained on the corpus (masked models)"),
            ("model", "the tokenizer of a registered model"),
        ],
        initial="bpe",
        required=False,
    )
    tokenizer_model = forms.ModelChoiceField(
        queryset=LanguageModel.objects.exclude(kind=LanguageModel.Kind.NGRAM).order_by("name"),
        to_field_name="name",
        required=False,
        help_text="With the tokenizer of a registered model: which model.",
    )
    layers = forms.IntegerField(required=False, min_value=1, help_text="blank: 12")
    width = forms.IntegerField(required=False, min_value=1, help_text="blank: 768")
    heads = forms.IntegerField(required=False, min_value=1, help_text="blank: 12")
    context = forms.IntegerField(
        required=False, min_value=1, help_text="Tokens per training block; blank: 1024"
    )
    vocab = forms.IntegerField(
        required=False,
        min_value=1,
        label="Vocabulary",
        help_text="The trained tokenizer's tokens at most; blank: 50257",
    )
    arch = forms.ChoiceField(
        choices=[("", "GPT-2 (blank)"), *[(a, a) for a in ARCHITECTURES]],
        required=False,
        label="Architecture",
        help_text="gpt2: GPT-2's; llama: RoPE, SwiGLU, RMSNorm, no biases",
    )
    mask_probability = forms.FloatField(
        required=False,
        initial=MASK_PROBABILITY,
        help_text="The share of tokens predicted (BERT's 0.15); a chosen token is [MASK] 80% "
        "of the time, a random token 10%, itself 10%.",
    )
    whole_word_masking = forms.BooleanField(
        required=False, help_text="Choose whole words, all their tokens at once."
    )
    steps = forms.IntegerField(initial=1000, min_value=1)
    batch_tokens = forms.IntegerField(
        initial=0, min_value=0, help_text="Tokens per step (gradient accumulation); 0: one pass"
    )
    micro_batch = forms.IntegerField(
        label="Micro-batch",
        required=False,
        initial=8,
        min_value=1,
        max_value=4096,
        help_text="Sequences per forward pass; blank: 8",
    )
    learning_rate = forms.FloatField(initial=1e-3, min_value=1e-8, max_value=1.0)
    warmup_steps = forms.IntegerField(
        label="Warm-up steps",
        required=False,
        min_value=0,
        help_text="Linear warm-up of the learning rate; blank: 5% of the steps",
    )
    weight_decay = forms.FloatField(
        required=False,
        initial=0.1,
        min_value=0.0,
        max_value=1.0,
        help_text="AdamW's, not on biases and norms; blank: 0.1",
    )
    checkpoints = forms.IntegerField(
        initial=8, min_value=1, max_value=100, help_text="Log-spaced by tokens seen"
    )
    keep_states = forms.IntegerField(
        required=False,
        initial=0,
        min_value=0,
        max_value=100,
        help_text="Keep the training state (optimizer, ...) of the last N checkpoints only; "
        "0: all. Every checkpoint keeps its weights.",
    )
    save_every = forms.IntegerField(
        required=False,
        initial=0,
        min_value=0,
        help_text="Also save a checkpoint every N steps (to resume from); 0: the schedule only.",
    )
    retention = forms.ChoiceField(
        choices=[
            ("all", "keep every checkpoint"),
            ("schedule", "keep the log-spaced schedule only"),
            ("last", "keep the last N only"),
        ],
        initial="all",
        required=False,
        help_text="Removed checkpoints keep their model pages and results, marked "
        "'weights removed'.",
    )
    keep_last = forms.IntegerField(required=False, initial=0, min_value=0, label="Keep last N")
    seed = forms.IntegerField(initial=0, min_value=0)
    suites = forms.ModelMultipleChoiceField(
        queryset=Suite.objects.filter(archived_at__isnull=True).order_by("name"),
        to_field_name="name",
        required=False,
        help_text="Evaluate every checkpoint on these suites (learning curves).",
    )
    pair_sets = forms.ModelMultipleChoiceField(
        queryset=MinimalPairSet.objects.order_by("name"),
        to_field_name="name",
        required=False,
        label="Minimal-pair sets",
        help_text="…and on these minimal-pair sets.",
    )
    probing_tasks = forms.ModelMultipleChoiceField(
        queryset=ProbingTask.objects.order_by("name"),
        to_field_name="name",
        required=False,
        help_text="…and probe them on these tasks (causal models; mean pooling, logistic "
        "regression).",
    )
    tags = forms.ModelMultipleChoiceField(
        queryset=Tag.objects.filter(suites__isnull=False).distinct().order_by("name"),
        to_field_name="name",
        required=False,
        help_text="…and on every suite with one of these tags.",
    )
    threshold = forms.FloatField(
        initial=0.8,
        min_value=0.01,
        max_value=1.0,
        help_text="Age of acquisition: the accuracy a suite must keep from a checkpoint on.",
    )

    def fieldsets(self) -> list[dict[str, Any]]:
        """The groups for the template: legend, kinds, preset, help and bound fields
        (with the kinds of a field that serves only some)."""
        return [
            {
                "legend": group.legend,
                "kinds": group.kinds,
                "preset": group.preset,
                "help": group.help,
                "fields": [(self[name], FIELD_KINDS.get(name, "")) for name in group.fields],
            }
            for group in GROUPS
        ]

    def _unused(self, kind: str, preset: str) -> set[str]:
        """The fields the chosen kind (and preset) does not read: their errors (a field
        hidden on the page, still sent) are no reason to refuse the form."""
        unused = set()
        for group in GROUPS:
            if group.kinds and kind not in group.kinds.split():
                unused |= set(group.fields)
            elif group.preset and group.preset != preset:
                unused |= set(group.fields)
        return unused | {name for name, kinds in FIELD_KINDS.items() if kind not in kinds.split()}

    def full_clean(self) -> None:
        """As Django's, then the fields the chosen kind does not read are left empty and
        without errors: a page with JavaScript hides them but still sends them."""
        super().full_clean()
        if not self.is_bound or "kind" not in self.cleaned_data:
            return
        kind, preset = self.cleaned_data["kind"], self.cleaned_data.get("preset", "")
        for name in self._unused(kind, preset):
            self.errors.pop(name, None)
            many = isinstance(self.fields[name], forms.ModelMultipleChoiceField)
            self.cleaned_data[name] = [] if many else None

    def options(self) -> dict[str, object]:
        data = self.cleaned_data
        if data["kind"] == TrainingRun.Kind.NGRAM:
            return {key: data[key] for key in ("order", "min_count", "memory_mb", "disk_mb")}
        options: dict[str, object] = {
            key: data[key] or 0 if key in ("keep_states", "save_every", "keep_last") else data[key]
            for key in (
                "preset",
                "steps",
                "batch_tokens",
                "learning_rate",
                "checkpoints",
                "keep_states",
                "save_every",
                "retention",
                "keep_last",
                "seed",
            )
        }
        options["retention"] = options["retention"] or "all"
        # Left blank: the service's default.
        for key in ("micro_batch", "warmup_steps", "weight_decay"):
            if data.get(key) is not None:
                options[key] = data[key]
        if data.get("base_model"):
            options["base_model"] = data["base_model"].name
            options.pop("preset")
            return options
        options["tokenizer"] = data.get("tokenizer") or "bpe"
        if options["tokenizer"] == "model" and data.get("tokenizer_model"):
            options["tokenizer_model"] = data["tokenizer_model"].name
        if data["preset"] == CUSTOM:
            options |= {key: data[key] for key in SHAPE_FIELDS if data.get(key)}
        if data["kind"] == TrainingRun.Kind.MASKED:
            options["whole_word_masking"] = bool(data["whole_word_masking"])
            if data.get("mask_probability") is not None:
                options["mask_probability"] = data["mask_probability"]
        return options


# Model series (docs/series.md, "From the site"): the API's fields, lists written as text.


def _listed(text: str) -> list[str]:
    """Items separated by commas, spaces or new lines."""
    return [part for part in text.replace(",", " ").split() if part]


class SeriesRegisterForm(forms.Form):
    """`POST /api/model-series/` as a form: a folder of Trainer checkpoints, or a source
    with revisions (a list, or a pattern with steps). The service checks what the API
    checks and its messages are shown at their fields."""

    name = forms.CharField(
        max_length=100, help_text="A short name of letters, digits and hyphens: the page's address."
    )
    display_name = forms.CharField(max_length=200, required=False)
    folder = forms.CharField(
        max_length=500,
        required=False,
        help_text="A folder of Trainer checkpoints (checkpoint-500/, checkpoint-1000/, …) under "
        "the model folders, absolute or relative to one of them. Or:",
    )
    source = forms.CharField(
        max_length=500,
        required=False,
        help_text="A hub id (EleutherAI/pythia-160m), or a folder under the model folders "
        "with one subfolder per revision, and its revisions:",
    )
    revisions = forms.CharField(
        max_length=20_000,
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="Separated by commas or spaces: step1000, step2000, or BabyLM's chck_1M, "
        "chck_10M (millions of words). Or a pattern with its steps:",
    )
    pattern = forms.CharField(max_length=100, required=False, help_text="Such as step{N}.")
    steps = forms.CharField(
        max_length=20_000,
        required=False,
        help_text="The steps {N} takes, or one step per revision listed above: 1000, 2000.",
    )
    tokens_per_step = forms.IntegerField(
        min_value=1,
        max_value=10**9,
        required=False,
        help_text="Tokens per step, where trainer_state.json or the revision's name does not "
        "say the tokens seen.",
    )
    group = forms.CharField(
        max_length=100,
        required=False,
        label="Seed group",
        help_text="Series of one group are seeds of one training: their mean with a band.",
    )
    threshold = forms.FloatField(
        initial=0.8,
        min_value=0.0,
        max_value=1.0,
        help_text="Age of acquisition: the accuracy a benchmark must keep from a checkpoint on.",
    )

    def clean_revisions(self) -> list[str]:
        return _listed(self.cleaned_data["revisions"])

    def clean_steps(self) -> list[int]:
        steps = _listed(self.cleaned_data["steps"])
        bad = [s for s in steps if not s.isdigit() or len(s) > 12]
        if bad:
            raise forms.ValidationError(
                f"{bad[0][:20]!r} is not a step: give whole numbers separated by commas"
            )
        return [int(s) for s in steps]


class SeriesEvaluateForm(forms.Form):
    """`POST /api/model-series/<name>/evaluate/` as a form: every member on these."""

    suites = forms.ModelMultipleChoiceField(
        queryset=Suite.objects.filter(archived_at__isnull=True).order_by("name"),
        to_field_name="name",
        required=False,
    )
    tags = forms.ModelMultipleChoiceField(
        queryset=Tag.objects.filter(suites__isnull=False).distinct().order_by("name"),
        to_field_name="name",
        required=False,
        help_text="…and every suite with one of these tags.",
    )
    pair_sets = forms.ModelMultipleChoiceField(
        queryset=MinimalPairSet.objects.order_by("name"),
        to_field_name="name",
        required=False,
        label="Minimal-pair sets",
    )
    probing_tasks = forms.ModelMultipleChoiceField(
        queryset=ProbingTask.objects.order_by("name"),
        to_field_name="name",
        required=False,
        help_text="Causal models; mean pooling, logistic regression.",
    )
    subset_size = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=MAX_SIZE,
        label="Fast subset: items per benchmark",
        help_text="Leave empty for the whole benchmarks. A fixed, seeded sample of this many "
        "items (pairs, lines) of each benchmark; its curves are shown beside the whole "
        "benchmarks', never mixed with them.",
    )
    subset_seed = forms.IntegerField(
        required=False,
        min_value=0,
        max_value=MAX_SEED,
        label="Subset seed",
        help_text="Which sample (0 when empty); the same size and seed give the same items.",
    )

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        size, seed = data.get("subset_size"), data.get("subset_seed")
        if size is None and seed is not None and "subset_size" not in self.errors:
            self.add_error("subset_size", "give the subset's size to draw a sample with a seed")
        data["subset"] = Subset(size, seed or 0) if size is not None else None
        return data
