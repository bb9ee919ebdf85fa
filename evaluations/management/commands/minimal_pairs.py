from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import CommandError, CommandParser

from evaluations.management.standalone import StandaloneCommand
from evaluations.minimal_pairs import analysis, files
from evaluations.minimal_pairs.tokens import predictions_to_tsv, scored_metric
from suites.formats.minimal_pairs import MinimalPairFormatError, MinimalPairSet, format_metric

METRIC_HELP = (
    "how pairs are compared (docs/minimal-pairs.md, Metrics), as the API's `metric`: "
    "sentence (the whole sentence's log probability after the start token), nlpscholar "
    "(NLPScholar's analysis of the ROI words), lm_eval (the whole sentence as "
    "lm-evaluation-harness scores it, with a leading space). Default: the set's format's "
    "(nlpscholar for an NLPScholar TSV, sentence for BLiMP JSONL and its relatives)"
)


def set_metric(pair_set: MinimalPairSet) -> str:
    """The metric a set's format (or its data) says its publishers report."""
    return pair_set.metric or format_metric(pair_set.source_format)


class Command(StandaloneCommand):
    help = (
        "Minimal pairs without the database, as NLPScholar's MinimalPair: `evaluate` writes "
        "the token table (surprisal in bits) of a data TSV or BLiMP JSONL for a model; "
        "`analyze` writes by_cond (RESULTS.tsv), by_pair (RESULTS_bypair.tsv) and by_word "
        "(RESULTS_byword.tsv)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        sub = parser.add_subparsers(dest="action", required=True)
        evaluate = sub.add_parser("evaluate", help="score every sentence of a set with a model")
        evaluate.add_argument("--model", required=True, help="hub id or a save_pretrained folder")
        evaluate.add_argument("--data", required=True, help="NLPScholar data TSV or BLiMP JSONL")
        evaluate.add_argument("--out", required=True, help="the predictions TSV to write")
        evaluate.add_argument(
            "--model-name", default="", help="the model column (default: --model)"
        )
        evaluate.add_argument("--kind", choices=["causal", "masked"], help="override detection")
        evaluate.add_argument(
            "--word-probability",
            choices=["tokens", "corrected"],
            default="tokens",
            help="'corrected': each word's last token also carries the word-boundary "
            "correction, so that word and ROI sums are word surprisals (causal LMs whose "
            "tokenizer marks word starts); the file then ends with a word_probability column",
        )
        evaluate.add_argument(
            "--metric",
            choices=analysis.METRICS,
            help=METRIC_HELP + "; only lm_eval scores another string, and the file then ends "
            "with a metric column that `analyze` reads",
        )
        evaluate.add_argument("--revision", default="", help="hub revision")
        evaluate.add_argument("--dtype", default="", help="bf16 or fp16 on a GPU")
        analyze = sub.add_parser("analyze", help="by_word / by_pair / by_cond tables")
        analyze.add_argument(
            "--pred", required=True, help="predictions TSV (Gym's or NLPScholar's)"
        )
        analyze.add_argument("--data", required=True, help="NLPScholar data TSV or BLiMP JSONL")
        analyze.add_argument("--out", required=True, help="RESULTS.tsv (by_cond); others beside it")
        analyze.add_argument("--save", default="by_word,by_pair,by_cond")
        analyze.add_argument(
            "--as-model",
            default="",
            help="report the predictions as the results of this model name (e.g. a model "
            "scored elsewhere with NLPScholar)",
        )
        analyze.add_argument(
            "--metric",
            choices=analysis.METRICS,
            help=METRIC_HELP + "; predictions scored with --metric lm_eval are read only "
            "under lm_eval, the default for them",
        )
        analyze.add_argument("--pred-measure", default="surp", choices=analysis.PRED_MEASURES)
        analyze.add_argument("--word-summary", default="mean", choices=analysis.WORD_SUMMARIES)
        analyze.add_argument("--punctuation", default="previous", choices=analysis.PUNCTUATION)
        analyze.add_argument("--conditions", default="", help="condition columns, comma-separated")
        analyze.add_argument(
            "--drop-incomplete-pairs",
            action="store_true",
            help="leave out pairs lacking an expected or unexpected sentence (as NLPScholar "
            "does) instead of stopping with an error",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        try:
            if options["action"] == "evaluate":
                self._evaluate(options)
            else:
                self._analyze(options)
        except (MinimalPairFormatError, analysis.AnalysisError, files.ConfigError) as exc:
            raise CommandError(str(exc)) from exc

    def _evaluate(self, options: dict[str, Any]) -> None:
        data = self._existing(options["data"])
        pair_set = files.load_pairs(data, drop_incomplete_pairs=True)
        for warning in pair_set.warnings:
            self.stderr.write(f"warning: {warning}")
        metric = options["metric"] or set_metric(pair_set)
        try:
            table = files.evaluate_file(
                source=options["model"],
                pair_set=pair_set,
                model_name=options["model_name"] or options["model"],
                kind=options["kind"],
                revision=options["revision"] or None,
                dtype=options["dtype"] or None,
                progress=self.sentence_progress,
                word_probability=options["word_probability"],
                metric=metric,
            )
        except Exception as exc:  # noqa: BLE001 - a model that cannot run, told to the user
            raise CommandError(f"{exc.__class__.__name__}: {exc}") from exc
        out = Path(options["out"])
        out.parent.mkdir(parents=True, exist_ok=True)
        asked = options["word_probability"]
        named = None if asked == "tokens" else self._applied(options, asked)
        scored = "lm_eval" if metric == "lm_eval" else None
        out.write_text(
            predictions_to_tsv(table, word_probability=named, metric=scored), encoding="utf-8"
        )
        self.stderr.write(
            f"{out}: {len(table)} tokens of {len(pair_set.sentences)} sentences (metric {metric})"
        )

    def _applied(self, options: dict[str, Any], asked: str) -> str:
        """What the corrected table holds: "corrected", or "tokens" (with a warning) for a
        model the correction does not apply to."""
        from evaluations.scoring import applied_word_probability, load_model

        model = load_model(  # the loaded model is cached: no second load
            options["model"],
            revision=options["revision"] or None,
            dtype=options["dtype"] or None,
            kind=options["kind"],
        )
        applied, why = applied_word_probability(model)
        if applied != asked:
            self.stderr.write(f"warning: word probabilities not corrected: {why}")
        return applied

    def _analyze(self, options: dict[str, Any]) -> None:
        pair_set = files.load_pairs(
            self._existing(options["data"]),
            drop_incomplete_pairs=options["drop_incomplete_pairs"],
        )
        pred = self._existing(options["pred"])
        tokens = files.load_predictions(pred)
        metric = self._analysis_metric(
            options["metric"], pair_set, scored_metric(pred.read_bytes())
        )
        if options["as_model"]:
            tokens = tokens.rename_model(options["as_model"])
        analysis_options = analysis.AnalysisOptions(
            pred_measure=options["pred_measure"],
            word_summary=options["word_summary"],
            punctuation=options["punctuation"],
            conditions=tuple(c.strip() for c in options["conditions"].split(",") if c.strip()),
            metric=metric,
        )
        result = files.analyze(
            tokens, pair_set, analysis_options, files.parse_save(options["save"])
        )
        for warning in result.warnings:
            self.stderr.write(f"warning: {warning}")
        for path in files.write_analysis(result, Path(options["out"])):
            self.stderr.write(f"wrote {path}")
        self.stderr.write(f"metric {metric}")

    def _analysis_metric(
        self, asked: str | None, pair_set: MinimalPairSet, scored: str | None
    ) -> str:
        """The metric asked for, else the predictions' (lm_eval), else the set's; refused
        where it does not fit how the tokens were scored, as the API refuses it on a run."""
        scored_lm_eval = scored == "lm_eval"
        metric = asked or ("lm_eval" if scored_lm_eval else set_metric(pair_set))
        if (metric == "lm_eval") != scored_lm_eval:
            raise CommandError(
                f"--metric {metric} does not fit these predictions, scored under "
                f"{'lm_eval' if scored_lm_eval else 'the sentence itself'}: lm_eval needs "
                "predictions scored as lm-evaluation-harness scores (minimal_pairs evaluate "
                "--metric lm_eval, which names it in a metric column), and such predictions "
                "are analysed only so"
            )
        return metric

    def _existing(self, name: str) -> Path:
        path = Path(name)
        if not path.is_file():
            raise CommandError(f"{name}: no such file")
        return path
