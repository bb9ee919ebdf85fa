from __future__ import annotations

from django import forms

from evaluations.models import LanguageModel
from evaluations.training.models import TrainingRun
from evaluations.training.options import MASK_PROBABILITY, MASKED_PRESETS, PRESETS
from suites.corpora.models import Corpus
from suites.models import MinimalPairSet, ProbingTask, Suite, Tag


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
    preset = forms.ChoiceField(
        choices=[(p, p) for p in [*PRESETS, *MASKED_PRESETS, "custom"]],
        initial="tiny",
        help_text="tiny: for trying; small: GPT-2 small (124M); -llama: the Llama style; "
        "-bert: masked runs' (small-bert: BERT-base's shape)",
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
            ("wordpiece", "WordPiece trained on the corpus (masked runs)"),
            ("unigram", "Unigram trained on the corpus"),
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
    mask_probability = forms.FloatField(
        required=False,
        initial=MASK_PROBABILITY,
        help_text="Masked runs: the share of tokens predicted (BERT's 0.15); a chosen token "
        "is [MASK] 80% of the time, a random token 10%, itself 10%.",
    )
    whole_word_masking = forms.BooleanField(
        required=False, help_text="Masked runs: choose whole words, all their tokens at once."
    )
    steps = forms.IntegerField(initial=1000, min_value=1)
    batch_tokens = forms.IntegerField(
        initial=0, min_value=0, help_text="Tokens per step (gradient accumulation); 0: one pass"
    )
    learning_rate = forms.FloatField(initial=1e-3, min_value=1e-8, max_value=1.0)
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

    def options(self) -> dict[str, object]:
        data = self.cleaned_data
        if data["kind"] == TrainingRun.Kind.NGRAM:
            return {"order": data["order"], "min_count": data["min_count"]}
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
        if data.get("base_model"):
            options["base_model"] = data["base_model"].name
            options.pop("preset")
        else:
            options["tokenizer"] = data.get("tokenizer") or "bpe"
            if options["tokenizer"] == "model" and data.get("tokenizer_model"):
                options["tokenizer_model"] = data["tokenizer_model"].name
        if data["kind"] == TrainingRun.Kind.MASKED:
            options["whole_word_masking"] = data["whole_word_masking"]
            if data.get("mask_probability") is not None:
                options["mask_probability"] = data["mask_probability"]
        return options
