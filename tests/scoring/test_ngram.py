"""n-gram models as a model kind: the ARPA reader against hand-computed back-off values,
word segmentation, unknown words, the CMU Sphinx binary through pocketsphinx (a tiny one
written here and the real CMU trigram), region sums, ties and unknown-word counts through
the store, the result page and the leaderboard, registration and the bootstrap baselines.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command

from evaluations import baseline
from evaluations.language_models import registry as model_registry
from evaluations.models import Evaluation, LanguageModel
from evaluations.scoring import kinds, load_model, model_info, score_sentences, worker
from evaluations.scoring.ngram import (
    OOV_PENALTY_BITS,
    SPHINX_BITS_PER_UNIT,
    ArpaModel,
    read_arpa,
    segment,
)
from evaluations.scoring.schema import ModelLoadError
from evaluations.syntaxgym import outcomes, services
from suites import formats
from suites.formats import predictions
from suites.syntaxgym import selectors as suite_selectors
from suites.syntaxgym import services as suite_services
from tests.conftest import EXAMPLES, SHARED_DATA, ngram_model, suite_document, token_client

L = math.log2(10.0)  # bits per unit of -log10 probability

# A tiny trigram. Hand-computed values below use only these numbers.
TINY_ARPA = """\\data\\
ngram 1=6
ngram 2=5
ngram 3=1

\\1-grams:
-1.0\t</s>
-99\t<s>\t-0.30
-0.50\tthe\t-0.25
-0.90\tcat\t-0.10
-1.20\tsat
-1.50\tmat\t-0.05

\\2-grams:
-0.20\t<s> the\t-0.15
-0.40\tthe cat
-0.30\tcat sat
-0.60\tsat </s>
-0.70\tthe mat

\\3-grams:
-0.10\t<s> the cat

\\end\\
"""


@pytest.fixture
def tiny_arpa(tmp_path: Path) -> Path:
    path = tmp_path / "tiny.arpa"
    path.write_text(TINY_ARPA, encoding="utf-8")
    return path


def _bits(model: Any, text: str) -> list[tuple[str, float, bool]]:
    return [(w.word.text, w.surprisal, w.oov) for w in model.score_text(text)]


# --- the ARPA reader and back-off ---------------------------------------------------------


def test_arpa_values_equal_hand_computed_back_off(tiny_arpa: Path) -> None:
    model = ngram_model(str(tiny_arpa))
    assert model.kind == "ngram" and model.order == 3
    got = _bits(model, "The cat sat.")
    # the|<s>: bigram -0.2; cat|<s> the: the trigram -0.1; sat|the cat: no trigram and
    # "the cat" has no back-off weight, so the bigram -0.3; </s>|cat sat: bigram -0.6.
    assert [w for w, _b, _o in got] == ["the", "cat", "sat", "</s>"]
    assert [b for _w, b, _o in got] == pytest.approx([0.2 * L, 0.1 * L, 0.3 * L, 0.6 * L])

    got = _bits(model, "the mat sat")
    # mat|<s> the: no trigram -> bo(<s> the) -0.15 + P(mat|the) (bigram -0.7) = -0.85.
    # sat|the mat: no trigram, no bo for "the mat" -> P(sat|mat): no bigram ->
    # bo(mat) -0.05 + P(sat) -1.2 = -1.25. No final mark: no </s>.
    assert [b for _w, b, _o in got] == pytest.approx([0.2 * L, 0.85 * L, 1.25 * L])

    got = _bits(model, "cat the")
    # cat|<s>: no bigram -> bo(<s>) -0.3 + P(cat) -0.9; the|<s> cat: no trigram, "<s> cat"
    # is no n-gram (no weight) -> P(the|cat): no bigram -> bo(cat) -0.1 + P(the) -0.5.
    assert [b for _w, b, _o in got] == pytest.approx([1.2 * L, 0.6 * L])


def test_unknown_words_get_the_penalty_and_cut_the_context(tiny_arpa: Path) -> None:
    model = load_model(str(tiny_arpa))
    got = _bits(model, "The dog sat.")
    # dog is unknown: the documented penalty, counted; sat is then scored without
    # context (the unigram -1.2), and </s>|sat is the bigram -0.6.
    assert got == [
        ("the", pytest.approx(0.2 * L), False),
        ("dog", OOV_PENALTY_BITS, True),
        ("sat", pytest.approx(1.2 * L), False),
        ("</s>", pytest.approx(0.6 * L), False),
    ]
    assert all(b < 1000 for _w, b, _o in got)


def test_unknown_words_use_the_models_own_unk(tmp_path: Path) -> None:
    text = TINY_ARPA.replace("ngram 1=6", "ngram 1=7").replace(
        "-1.50\tmat\t-0.05\n", "-1.50\tmat\t-0.05\n-2.00\t<unk>\n"
    )
    path = tmp_path / "unk.arpa"
    path.write_text(text, encoding="utf-8")
    model = load_model(str(path))
    got = _bits(model, "the dog sat")
    # dog -> <unk> after "<s> the": bo(<s> the) -0.15 + bo(the) -0.25 + P(<unk>) -2.0;
    # sat|the <unk>: no n-grams with <unk>: P(sat) -1.2.
    assert got == [
        ("the", pytest.approx(0.2 * L), False),
        ("dog", pytest.approx(2.4 * L), True),
        ("sat", pytest.approx(1.2 * L), False),
    ]
    assert model_info(model)["unknown_words"] == "scored as <unk>"


def test_gzipped_arpa_reads_the_same(tmp_path: Path) -> None:
    import gzip

    path = tmp_path / "tiny.arpa.gz"
    path.write_bytes(gzip.compress(TINY_ARPA.encode()))
    assert kinds.ngram_format(path) == kinds.ARPA_GZ
    model = load_model(str(path))
    assert [b for _w, b, _o in _bits(model, "The cat sat.")] == pytest.approx(
        [0.2 * L, 0.1 * L, 0.3 * L, 0.6 * L]
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (TINY_ARPA.replace("ngram 2=5", "ngram 2=6"), "declares 6 2-grams but has 5"),
        (TINY_ARPA.replace("-0.40\tthe cat", "-0.40\tthe"), "line 16: a 2-gram line needs"),
        (TINY_ARPA.replace("-0.90\tcat", "x\tcat"), "line 10: not a number"),
        (TINY_ARPA.replace("\\end\\\n", ""), "ends before \\end\\"),
        (TINY_ARPA.replace("\\3-grams:", "\\4-grams:"), "section \\4-grams: was not declared"),
    ],
)
def test_broken_arpa_files_say_where(text: str, message: str) -> None:
    with pytest.raises(ModelLoadError) as caught:
        read_arpa(io.StringIO(text), "bad.arpa")
    assert message in str(caught.value) and "bad.arpa" in str(caught.value)


# --- words ------------------------------------------------------------------------------


def test_segmentation_rules() -> None:
    vocab = {"the", "didn't", "'s", "company", "well", "known", "n't", "could", "</s>"}
    known = vocab.__contains__
    text = "The company's (well-known) CEO couldn\u2019t stay, didn't he? \u201cNo!\u201d"
    words = segment(text, known)
    assert [w.text for w in words] == [
        "the",
        "company",
        "'s",
        "well",
        "known",
        "ceo",
        "could",
        "n't",
        "stay",
        "didn't",
        "he",
        "no",
        "</s>",
    ]
    # Offsets point into the original text: the clitic keeps its apostrophe, and </s>
    # sits on the final "!" inside the closing quote.
    by_text = {w.text: text[w.start : w.end] for w in words}
    assert by_text["'s"] == "'s" and by_text["n't"] == "n\u2019t" and by_text["</s>"] == "!"
    assert by_text["ceo"] == "CEO" and by_text["well"] == "well"
    # Inner marks are dropped; a sentence without a final mark has no </s>; digits stay.
    assert [w.text for w in segment("Mr. Smith, 1990 , left", known)] == [
        "mr",
        "smith",
        "1990",
        "left",
    ]
    assert [w.text for w in segment("Really?! ...", known)][-1] == "</s>"
    assert segment("  , ; ", known) == []


def test_region_sums_and_punctuation_regions(tiny_arpa: Path) -> None:
    model = load_model(str(tiny_arpa))
    [scored] = score_sentences(model, [["The cat", ",", "sat", "", "."]])
    sums = [region.metrics["sum"] for region in scored.regions]
    # A comma region holds characters but no word: it has no value (never 0 bits), as a
    # region no subword token starts in. The empty region sums to 0. The final period is
    # </s>, scored in its own region.
    assert sums == [
        pytest.approx(0.3 * L),
        None,
        pytest.approx(0.3 * L),
        0.0,
        pytest.approx(0.6 * L),
    ]
    assert [t.region for t in scored.tokens] == [0, 0, 2, 4]
    assert scored.diagnostics["oov_words"] == 0 and scored.diagnostics["tokens"] == 4
    assert scored.diagnostics["regions_without_tokens"] == 1


# --- CMU Sphinx binaries ----------------------------------------------------------------


def test_sphinx_binary_agrees_with_the_arpa_reader(tiny_arpa: Path, tmp_path: Path) -> None:
    """pocketsphinx converts the tiny ARPA file to its trie format; the same sentences
    score the same through both back ends (Sphinx stores log base 1.0001 integers)."""
    import pocketsphinx

    logmath = pocketsphinx.LogMath()
    source = pocketsphinx.NGramModel(pocketsphinx.Config(), logmath, str(tiny_arpa))
    binary = tmp_path / "tiny.lm.bin"
    source.write(str(binary), pocketsphinx.NGramModel.str_to_type("bin"))
    assert kinds.ngram_format(binary) == kinds.SPHINX_TRIE

    arpa, sphinx = load_model(str(tiny_arpa)), ngram_model(str(binary))
    assert model_info(sphinx)["vocab_size"] == 6 and sphinx.order == 3
    for text in ["The cat sat.", "the mat sat", "cat the .", "The dog sat."]:
        a, s = _bits(arpa, text), _bits(sphinx, text)
        assert [(w, o) for w, _b, o in a] == [(w, o) for w, _b, o in s]
        assert [b for _w, b, _o in s] == pytest.approx([b for _w, b, _o in a], abs=1e-3)


CMU_TRIGRAM = baseline.cmu_trigram_path()
needs_trigram = pytest.mark.skipif(CMU_TRIGRAM is None, reason="pocketsphinx is not installed")


@needs_trigram
def test_real_cmu_trigram_values() -> None:
    """The one real trained model here: values equal pocketsphinx's own integers."""
    import pocketsphinx

    model = load_model(str(CMU_TRIGRAM))
    info = model_info(model)
    assert (info["kind"], info["order"], info["format"]) == ("ngram", 3, "sphinx-trie")
    assert info["vocab_size"] == 72547

    logmath = pocketsphinx.LogMath()
    raw = pocketsphinx.NGramModel(pocketsphinx.Config(), logmath, str(CMU_TRIGRAM))
    got = _bits(model, "The keys to the cabinet are on the table.")
    words = [w for w, _b, _o in got]
    assert words == ["the", "keys", "to", "the", "cabinet", "are", "on", "the", "table", "</s>"]
    history = ["<s>"]
    for word, value, oov in got:
        expected = -raw.prob([word, *reversed(history[-2:])]) * SPHINX_BITS_PER_UNIT
        assert not oov and value == pytest.approx(expected, abs=1e-9)
        history.append(word)
    # P(are | the cabinet) and P(is | the cabinet), as measured: 7.32 and 5.80 bits.
    assert got[5][1] == pytest.approx(7.323, abs=1e-3)
    assert _bits(model, "the cabinet is")[2][1] == pytest.approx(5.798, abs=1e-3)
    # Unknown words never reach a sum as Sphinx's sentinel (about 77,000 bits).
    assert _bits(model, "the xqzzyv left") == [
        ("the", pytest.approx(4.2152, abs=1e-3), False),
        ("xqzzyv", OOV_PENALTY_BITS, True),
        ("left", pytest.approx(-raw.prob(["left"]) * SPHINX_BITS_PER_UNIT), False),
    ]


def _trigram_outcome(path: Path) -> outcomes.SuiteOutcome:
    """The suite file at `path` scored by the real CMU trigram, every word of it in the
    trigram's vocabulary."""
    suite = formats.load_suite_file(path).suite
    assert suite is not None
    payload = {
        "model": {"source": str(CMU_TRIGRAM)},
        "sentences": [regions for _i, _c, regions in formats.sentences(suite)],
    }
    result = worker.run_scoring(payload)
    assert result["diagnostics"]["oov_words"] == 0
    return outcomes.score_items(suite, result["sentences"])


@needs_trigram
def test_real_trigram_on_real_suites_ties_and_accuracy() -> None:
    """A trigram sees two words back: where the conditions differ earlier, the critical
    region ties exactly (mvrr: 3 comparisons per item), and a tie fails."""
    folder = SHARED_DATA / "syntaxgym-2020" / "nextflow"
    scores: dict[str, outcomes.SuiteOutcome] = {}
    for name in ("mvrr", "cleft", "number_prep"):
        scores[name] = _trigram_outcome(folder / f"{name}.json")
    mvrr = scores["mvrr"]
    assert mvrr.ties == 3 * len(mvrr.items) and mvrr.accuracy == 0.0
    assert mvrr.accuracy_random_ties == pytest.approx(0.125)
    assert scores["cleft"].accuracy == 1.0 and scores["cleft"].ties == 0
    assert scores["number_prep"].accuracy == 0.0


# What the real trigram scores on each example suite, as measured (`manage.py score` on
# examples/): the three suites that two words of context decide are clearly above chance;
# the other three need more than a trigram (agreement across a phrase, a garden path, NPI
# licensing) and get nothing right.
EXAMPLE_ACCURACY = {
    "agreement_local": (0.90, 0),
    "determiner_noun": (1.00, 0),
    "transitive_object": (0.95, 0),
    "agreement_pp": (0.0, 0),
    "garden_path_npz": (0.0, 20),
    "npi_licensing": (0.0, 20),
}


@needs_trigram
@pytest.mark.parametrize("stem", sorted(EXAMPLE_ACCURACY))
def test_real_trigram_on_the_example_suites(stem: str) -> None:
    # Every word of the example suites is in the trigram's vocabulary (checked there).
    scored = _trigram_outcome(EXAMPLES / f"{stem}.json")
    accuracy, ties = EXAMPLE_ACCURACY[stem]
    assert (scored.accuracy, scored.ties) == (pytest.approx(accuracy), ties)


@needs_trigram
def test_minimal_pairs_score_words_of_the_trigram() -> None:
    """Minimal pairs go through the same engine: each word is a token, </s> lands on the
    final period (a punctuation word of the set)."""
    from evaluations.minimal_pairs.files import evaluate_file, load_pairs

    repo = Path(__file__).resolve().parents[2]
    pairs = load_pairs(
        repo / "examples" / "minimal_pairs" / "agreement_minimal_pairs.tsv",
        drop_incomplete_pairs=False,
    )
    table = evaluate_file(source=str(CMU_TRIGRAM), pair_set=pairs, model_name="cmu")
    assert len(table) > 0 and table.tokenizer[0] == "cmu"
    assert table.token[0] == "the" and table.surp[0] == pytest.approx(4.2152, abs=1e-3)
    ends = [i for i, token in enumerate(table.token) if token == "</s>"]
    assert ends and all(table.word[i] == "." and table.punctuation[i] for i in ends)


# --- ties ---------------------------------------------------------------------------------


def test_ties_fail_are_counted_and_break_at_random() -> None:
    both = predictions.parse("((1;%a%) < (1;%b%)) & ((2;%a%) < (2;%b%))")
    either = predictions.parse("((1;%a%) < (1;%b%)) | ((2;%a%) > (2;%b%))")
    values = {(1, "a"): 3.0, (1, "b"): 3.0, (2, "a"): 1.0, (2, "b"): 2.0}

    def lookup(region: int | None, condition: str) -> float | None:
        return values[(region or 0, condition)]

    assert predictions.evaluate(both, lookup) is False
    assert predictions.tied_comparisons(both, lookup) == 1
    assert predictions.truth_with_random_ties(both, lookup) == 0.5
    values[(2, "a")] = 2.0  # now both comparisons tie
    assert predictions.tied_comparisons(both, lookup) == 2
    assert predictions.truth_with_random_ties(both, lookup) == 0.25
    assert predictions.truth_with_random_ties(either, lookup) == 0.75
    # "=" never ties; the same comparison twice is one coin.
    same = predictions.parse("((1;%a%) < (1;%b%)) & ~((1;%a%) < (1;%b%))")
    assert predictions.truth_with_random_ties(same, lookup) == 0.0
    assert predictions.tied_comparisons(predictions.parse("(1;%a%) = (1;%b%)"), lookup) == 0


def _ngram_suite(name: str = "ngram ties") -> dict[str, Any]:
    """Item 1 ties in region 2: "sat" follows "cat" in both conditions, and the unknown
    "a" cuts the context before it. Item 2 passes on an unknown word's penalty."""
    items = {
        1: {"a": ["The cat", "sat", "."], "b": ["A cat", "sat", "."]},
        2: {"a": ["The cat", "sat", "."], "b": ["The", "dog", "."]},
    }
    formulas = ["(2;%b%) > (2;%a%)"]
    return suite_document(name, items, formulas, region_names=("start", "verb", "end"))


@pytest.mark.django_db
def test_store_counts_ties_and_unknown_words_and_pages_show_them(
    tiny_arpa: Path, anon_client
) -> None:
    suite = suite_services.suite_import(source=_ngram_suite(), owner=None).suite
    model = model_registry.model_register(source=str(tiny_arpa), name="tiny-arpa")
    assert model.kind == "ngram"
    snapshot = suite_selectors.suite_canonical(suite)
    evaluation = services.evaluation_create(
        model=model, suite=suite, content_hash=suite.content_hash, snapshot=snapshot
    )
    payload = services.scoring_payload(evaluation)
    results = worker.run_scoring(payload)
    # "a" (item 1) and "dog" (item 2) are not in the tiny vocabulary.
    assert results["diagnostics"]["oov_words"] == 2
    assert services.results_store(evaluation_id=evaluation.pk, attempt=1, results=results)
    evaluation.refresh_from_db()
    assert evaluation.status == "done" and evaluation.accuracy == 0.5
    assert evaluation.ties == 1 and evaluation.accuracy_random_ties == 0.75
    assert evaluation.prediction_results.get().ties == 1
    # Region 2 of item 1: sat|cat in both conditions, exactly.
    values = evaluation.item_results.get(item_number=1).values
    assert values["a"]["sum"][1] == values["b"]["sum"][1] == pytest.approx(0.3 * L)

    page = anon_client.get(f"/evaluations/{evaluation.pk}/results/").content.decode()
    assert 'id="ties"' in page and "coin flips" in page and "0.75" in page
    assert 'id="oov"' in page and "unknown word" in page and "32 bits" in page

    board = anon_client.get("/api/leaderboard/").json()
    [row] = board["rows"]
    assert row["ties"] == 1 and row["scores"]["ngram ties"]["ties"] == 1
    csv_text = anon_client.get("/leaderboard.csv").content.decode().splitlines()
    header, line = csv_text[0].split(","), csv_text[1].split(",")
    assert line[header.index("ties")] == "1"
    LanguageModel.objects.filter(pk=model.pk).update(is_baseline=True)
    assert "a classic word n-gram model" in anon_client.get("/leaderboard/").content.decode()


def test_score_command_with_an_arpa_file(tiny_arpa: Path, tmp_path: Path) -> None:
    suites = tmp_path / "suites"
    suites.mkdir()
    (suites / "one.json").write_text(json.dumps(_ngram_suite("one")), encoding="utf-8")
    (suites / "two.json").write_text(json.dumps(_ngram_suite("two")), encoding="utf-8")
    out, err = tmp_path / "out", io.StringIO()
    call_command("score", model=str(tiny_arpa), suite=[str(suites)], out=str(out), stderr=err)
    results = json.loads((out / "one.results.json").read_text())["results"]
    assert results["accuracy"] == 0.5 and results["ties"] == 1
    assert results["accuracy_random_ties"] == 0.75
    assert [item["ties"] for item in results["items"]] == [1, 0]
    assert results["diagnostics"]["oov_words"] == 2
    assert results["model_info"]["kind"] == "ngram" and results["model_info"]["order"] == 3
    assert "mean accuracy over 2 suites: 0.500 (ties fail); 0.750 with ties broken" in (
        err.getvalue()
    )


# --- registration and the bootstrap -------------------------------------------------------


@pytest.mark.django_db
def test_register_an_arpa_file_by_path_page_and_api(tiny_arpa: Path, alice, alice_client) -> None:

    response = alice_client.post_form(
        "/models/register/", {"source": str(tiny_arpa), "name": "tiny-page"}
    )
    assert response.status_code == 302
    assert LanguageModel.objects.get(name="tiny-page").kind == "ngram"

    other = tiny_arpa.with_name("copy.arpa")
    other.write_text(TINY_ARPA, encoding="utf-8")
    response = token_client(alice).post(
        "/api/models/",
        data=json.dumps({"source": str(other), "name": "tiny-api", "display_name": "Tiny"}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    assert response.json()["kind"] == "ngram"

    junk = tiny_arpa.with_name("notes.txt")
    junk.write_text("not a model\n", encoding="utf-8")
    response = alice_client.post_form("/models/register/", {"source": str(junk), "name": "junk"})
    assert response.status_code == 400
    assert "not an n-gram model" in response.content.decode()
    assert not LanguageModel.objects.filter(name="junk").exists()


def test_kind_detection_is_one_rule(tiny_arpa: Path, tmp_path: Path) -> None:
    assert kinds.detect_kind(str(tiny_arpa)) == "ngram"
    with pytest.raises(ModelLoadError, match="not an n-gram model"):
        junk = tmp_path / "junk.bin"
        junk.write_bytes(b"\x00\x01 not a model")
        kinds.detect_kind(str(junk))
    with pytest.raises(kinds.ConfigUnavailable):
        kinds.detect_kind(str(tmp_path / "no-such-folder"), local_files_only=True)
    assert model_registry.detect_kind(str(tiny_arpa)) == ("ngram", "")


@pytest.mark.django_db
@needs_trigram
def test_bootstrap_registers_both_baselines_on_a_fresh_database(settings, tmp_path: Path) -> None:
    settings.VAR_DIR = tmp_path
    out = io.StringIO()
    call_command("gym_bootstrap", stdout=out)
    models = {m.name: m for m in LanguageModel.objects.all()}
    assert set(models) == {baseline.BASELINE_NAME, baseline.NGRAM_BASELINE_NAME}
    trigram = models[baseline.NGRAM_BASELINE_NAME]
    assert trigram.display_name == "CMU US English trigram (n-gram baseline)"
    assert trigram.kind == "ngram" and trigram.is_baseline
    assert CMU_TRIGRAM is not None and trigram.source == str(CMU_TRIGRAM.resolve())
    assert models[baseline.BASELINE_NAME].kind == "causal"
    assert models[baseline.BASELINE_NAME].is_baseline
    # Running it again changes nothing.
    call_command("gym_bootstrap", stdout=io.StringIO())
    assert LanguageModel.objects.count() == 2
    assert "already registered" not in out.getvalue()


@pytest.mark.django_db
@needs_trigram
def test_bootstrap_queues_both_baselines_on_the_example_suites_once(
    settings, tmp_path: Path, alice
) -> None:
    settings.VAR_DIR = tmp_path
    call_command("import_suites", str(EXAMPLES), stdout=io.StringIO())
    examples = set(suite_selectors.Suite.objects.values_list("name", flat=True))
    assert len(examples) == 6
    # A user's own suite is not the site's to evaluate.
    suite_services.suite_import(
        source=(EXAMPLES / "npi_licensing.json").read_text(),
        owner=alice,
        name="alices-own",
    )
    out = io.StringIO()
    call_command("gym_bootstrap", "--evaluate-examples", stdout=out)
    asked = set(Evaluation.objects.values_list("model__name", "suite__name"))
    assert asked == {
        (model, suite)
        for model in (baseline.BASELINE_NAME, baseline.NGRAM_BASELINE_NAME)
        for suite in examples
    }
    assert "6 example suites queued" in out.getvalue()
    # The run command does this at every start: asking again adds nothing.
    again = io.StringIO()
    call_command("gym_bootstrap", "--evaluate-examples", stdout=again)
    assert Evaluation.objects.count() == 12
    assert "0 example suites queued, 6 already asked for" in again.getvalue()


@needs_trigram
def test_loading_a_sphinx_model_never_imports_sounddevice() -> None:
    """pocketsphinx depends on sounddevice, which needs the PortAudio library when it is
    imported; scoring must not import it (a fresh worker has no PortAudio)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from evaluations.scoring import load_model, score_sentences\n"
        f"model = load_model({str(CMU_TRIGRAM)!r})\n"
        "score_sentences(model, [['The cat', 'sat.']])\n"
        "assert 'sounddevice' not in sys.modules, 'sounddevice was imported'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=Path(__file__).resolve().parents[2],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr


def test_arpa_model_is_pure_python() -> None:
    model = ArpaModel(1, {("a",): -1.0}, {})
    assert model.known("a") and not model.known("b") and model.bits("a", ()) == L
