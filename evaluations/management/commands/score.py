from __future__ import annotations

import json
import math
import os
import resource
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from evaluations.management.standalone import StandaloneCommand
from evaluations.scoring import worker
from evaluations.statistics import accuracy_counts
from evaluations.syntaxgym import outcomes
from suites import formats


def process_age() -> float | None:
    """Seconds since this process started (Linux), or None where that cannot be read."""
    try:
        ticks = os.sysconf("SC_CLK_TCK")
        stat = Path("/proc/self/stat").read_text()
        # Field 22 (start time in clock ticks since boot), counted after the command name.
        start = int(stat.rsplit(")", 1)[1].split()[19]) / ticks
        uptime = float(Path("/proc/uptime").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None
    return round(uptime - start, 3)


def cpu_seconds() -> float:
    """User plus system CPU seconds this process has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return round(usage.ru_utime + usage.ru_stime, 3)


class Command(StandaloneCommand):
    help = (
        "Score suites with a language model and write SyntaxGym results files (region "
        "values in bits) with per-prediction, per-item outcomes and the suite accuracy. "
        "Needs no database: the model is loaded once, and all suites are scored in one "
        "pass (sentences and prefixes they share are computed once)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--model",
            required=True,
            help="hub id, a folder saved with save_pretrained, or an n-gram model file "
            "(ARPA, gzipped ARPA, CMU Sphinx .lm.bin/DMP)",
        )
        parser.add_argument("--revision", default="", help="hub revision")
        parser.add_argument(
            "--dtype", default="", help="bf16 or fp16 on a GPU (log-probs stay fp32)"
        )
        parser.add_argument(
            "--suite",
            action="append",
            required=True,
            metavar="PATH",
            help="a suite file in any known format, or a folder of them (repeatable)",
        )
        parser.add_argument(
            "--straddling",
            choices=["missing", "split"],
            default=None,
            help="a token spanning several regions: 'missing' (default; a region it "
            "swallowed has no value) or 'split' (its surprisal divided by characters); "
            "default from GYM_STRADDLING_TOKENS",
        )
        parser.add_argument(
            "--word-probability",
            choices=["tokens", "corrected"],
            default="tokens",
            help="a region's sum: 'tokens' (default; the sum of its token surprisals) or "
            "'corrected' (minus log2 B after the region plus log2 B before it, B being the "
            "probability that the next token begins a word: Pimentel & Meister 2024); "
            "applies to causal LMs whose tokenizer marks word starts ('Ġ', '▁'), and the "
            "results say whether it was applied",
        )
        parser.add_argument(
            "--out", help="results file (one suite) or folder (several); default: standard output"
        )
        parser.add_argument(
            "--timings",
            action="store_true",
            help="also print where the time went (process start, reading the suites, "
            "each step of the model load, scoring, writing), as one JSON line on stderr",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        clock = time.perf_counter()
        timings: dict[str, Any] = {"before_handle": process_age()}

        def lap(step: str) -> None:
            nonlocal clock
            now = time.perf_counter()
            timings[step] = round(now - clock, 3)
            clock = now

        paths = self._suite_files(options["suite"])
        suites = []
        for path in paths:
            result = formats.load_suite_file(path)
            if not result.ok or result.suite is None:
                details = "; ".join(f"{e.path}: {e.message}" for e in result.errors[:5])
                raise CommandError(f"{path}: not a valid suite: {details}")
            suites.append((path, result.suite))
        out = Path(options["out"]) if options["out"] else None
        if len(suites) > 1 and out is None:
            raise CommandError("several suites need --out FOLDER (one results file per suite)")
        if len(suites) > 1 and out is not None:
            out.mkdir(parents=True, exist_ok=True)

        lap("read_suites")
        started = time.perf_counter()
        model_spec = {
            "source": options["model"],
            "revision": options["revision"],
            "dtype": options["dtype"],
        }
        payload = {
            "model": model_spec,
            "groups": [
                [regions for _i, _c, regions in formats.sentences(suite)] for _p, suite in suites
            ],
            "straddling": options["straddling"] or settings.GYM_STRADDLING_TOKENS,
            "word_probability": options["word_probability"],
        }
        try:
            # Loaded first (and kept in the process's cache) so its steps can be told apart.
            model = worker.payload_model(model_spec)
            lap("load_model")
            # CPU seconds (user + system) this process spent before its first forward
            # pass: unlike the wall clock, not stretched by other processes' load.
            timings["cpu_at_scoring"] = cpu_seconds()
            timings["load_steps"] = {
                k: round(v, 3) for k, v in getattr(model, "timings", {}).items()
            }
            scored_suites = worker.run_scoring_groups(payload, progress=self.sentence_progress)
            lap("scoring")
        except Exception as exc:  # noqa: BLE001 - reported to the user
            raise CommandError(f"{exc.__class__.__name__}: {exc}") from exc
        self.end_progress_line()
        summary: list[tuple[float | None, float | None]] = []
        for (path, suite), scored in zip(suites, scored_suites, strict=True):
            document = self._document(suite, scored, options["model"])
            text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
            if out is None:
                self.stdout.write(text, ending="")
            else:
                target = out / f"{path.stem}.results.json" if len(suites) > 1 else out
                target.write_text(text, encoding="utf-8")
            results = document["results"]
            accuracy = results["accuracy"]
            shown = "n/a" if accuracy is None else f"{accuracy:.3f}"
            ties = ""
            if results["ties"]:
                ties = f", {results['ties']} tied comparisons (random ties: "
                ties += f"{results['accuracy_random_ties']:.3f})"
            self.stderr.write(f"{path}: accuracy {shown} over {len(suite['items'])} items{ties}")
            summary.append((accuracy, results["accuracy_random_ties"]))
        sentences = sum(len(group) for group in payload["groups"])
        self.stderr.write(
            f"{len(suites)} suite{'s' if len(suites) != 1 else ''}, {sentences} sentences "
            f"in {time.perf_counter() - started:.1f} s (model load included)"
        )
        if len(summary) > 1:
            self.stderr.write(self._summary(summary))
        if options["timings"]:
            lap("writing")
            self.stderr.write("timings " + json.dumps(timings))

    def _summary(self, accuracies: list[tuple[float | None, float | None]]) -> str:
        """The mean suite accuracy (SyntaxGym's SG score) over suites with predictions."""
        strict = [a for a, _r in accuracies if a is not None]
        broken = [r for _a, r in accuracies if r is not None]
        if not strict:
            return f"{len(accuracies)} suites, none with predictions"
        return (
            f"mean accuracy over {len(strict)} suites: {math.fsum(strict) / len(strict):.3f} "
            f"(ties fail); {math.fsum(broken) / len(broken):.3f} with ties broken at random"
        )

    def _suite_files(self, raw: list[str]) -> list[Path]:
        files: list[Path] = []
        for item in raw:
            path = Path(item)
            if path.is_dir():
                files += sorted(p for p in path.glob("*.json") if p.is_file())
            elif path.is_file():
                files.append(path)
            else:
                raise CommandError(f"{item}: no such file or folder")
        if not files:
            raise CommandError("no suite files found")
        return files

    def _document(
        self, suite: dict[str, Any], scored: dict[str, Any], model_name: str
    ) -> dict[str, Any]:
        outcome = outcomes.score_items(suite, scored["sentences"])
        document = outcomes.results_document(
            suite, model_name, {item.item_number: item.values for item in outcome.items}
        )
        word = scored["diagnostics"].get("word_probability")
        document["results"] = {
            "units": "bits",
            "metric": outcome.metric,
            # Only when asked for, so that files without it read as before.
            **({"word_probability": word} if word is not None else {}),
            "accuracy": outcome.accuracy,
            # The counts the accuracy is the share of, and its 95% Wilson interval.
            **accuracy_counts(item.passed for item in outcome.items),
            # Strict comparisons with exactly equal sides (each failed), and the expected
            # accuracy had every tie been broken by a fair coin.
            "ties": outcome.ties,
            "accuracy_random_ties": outcome.accuracy_random_ties,
            "predictions": outcomes.prediction_entries(outcome.predictions),
            "items": [
                {
                    "item_number": item.item_number,
                    "outcomes": item.outcomes,
                    "passed": item.passed,
                    "ties": item.ties,
                }
                for item in outcome.items
            ],
            "diagnostics": scored["diagnostics"],
            "model_info": scored["model_info"],
        }
        return document
