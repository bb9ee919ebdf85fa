"""Every reader of an upload works in bounded memory (issue 43): suites (JSON, CSV),
minimal-pair sets (NLPScholar TSV, BLiMP-family JSON Lines, Parquet, CLAMS and Zorro
text), probing tasks and predictions files.

Each attack is a body within the upload limit (20 MB) that once built far more than it
weighed: a Parquet column that unpacks to gigabytes, one enormous line or field, deep
nesting, millions of tiny rows or values, a region numbered in the billions. Each goes through
the real API in a child process whose memory is measured and capped
(tests/memory_cap.py), and must get an error that names the limit and its setting,
store nothing, and stay under the cap. Then hypothesis feeds every format random bytes
and mutated files through the services: an import or a located error, never anything
else, in bounded memory.
"""

from __future__ import annotations

import io
import json
import random
import string
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from django.db import transaction
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests import memory_cap
from tests.conftest import SHARED_DATA, token_client

pytestmark = [
    pytest.mark.skipif(not memory_cap.available(), reason="measures memory through /proc"),
    pytest.mark.django_db(transaction=True),
]

MB = 1024 * 1024
# Under GYM_MAX_UPLOAD_BYTES (20 MiB), so that every body reaches its reader.
BODY = 20_000_000
# What reading one upload may take, by kind (a large real upload takes about half of it).
CAP_MB = {"suite": 600, "csv": 600, "pairs": 600, "probing": 200, "predictions": 400}
PREDICTIONS_HEADER = "token\tsentid\tword\twordpos\tmodel\ttokenizer\tpunctuation\tprob\tsurp\n"


def repeated(head: str, unit: str, tail: str = "", size: int = BODY) -> bytes:
    """`head`, then `unit` as many times as fit in `size` bytes with `tail`."""
    count = (size - len(head) - len(tail)) // len(unit.encode())
    return (head + unit * count + tail).encode()


def suite_text(items: str, region_meta: str = '"1": "a"', meta: str = "") -> str:
    return (
        f'{{"meta": {{"name": "attack"{meta}}}, "region_meta": {{{region_meta}}}, '
        f'"predictions": [], "items": [{items}]}}'
    )


ITEM = '{"item_number": %d, "conditions": [{"condition_name": "c", "regions": [%s]}]}'
REGION = '{"region_number": 1, "content": "%s"}'


def suite_region_bomb() -> bytes:
    """200,000 regions in region_meta, 50,000 conditions that list one: each condition
    once listed every region it lacked."""
    names = ", ".join(f'"{n}": "r"' for n in range(1, 200_001))
    items = ", ".join(ITEM % (n, REGION % "w") for n in range(1, 50_001))
    return suite_text(items, region_meta=names).encode()


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


def parquet(columns: dict[str, Any]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.table(columns), out, compression="zstd")
    return out.getvalue()


def parquet_bomb(rows: int, width: int) -> bytes:
    """Two dictionary-encoded columns: one text of `width` characters repeated `rows`
    times, a few kilobytes on disk."""
    import numpy as np
    import pyarrow as pa

    indices = pa.array(np.zeros(rows, dtype=np.int32))
    return parquet(
        {
            "sentence_good": pa.DictionaryArray.from_arrays(indices, pa.array(["g" * width])),
            "sentence_bad": pa.DictionaryArray.from_arrays(indices, pa.array(["b" * width])),
        }
    )


def parquet_long_list(values: int) -> bytes:
    """One row whose list column holds `values` copies of one text: a few kilobytes."""
    import numpy as np
    import pyarrow as pa

    indices = pa.array(np.zeros(values, dtype=np.int32))
    items = pa.DictionaryArray.from_arrays(indices, pa.array(["x" * 1000]))
    offsets = pa.array([0, values], pa.int32())
    return parquet(
        {
            "sentence_good": ["a"],
            "sentence_bad": ["b"],
            "tags": pa.ListArray.from_arrays(offsets, items),
        }
    )


def parquet_wide(columns: int) -> bytes:
    import pyarrow as pa

    table: dict[str, Any] = {f"c{i}": pa.array([None], pa.int8()) for i in range(columns)}
    return parquet({"sentence_good": ["a"], "sentence_bad": ["b"], **table})


@dataclass(frozen=True)
class Attack:
    kind: str  # a key of CAP_MB
    url: str
    body: Callable[[], bytes]
    setting: str  # the setting the refusal names ('' for an error that names none)
    words: str = ""  # what the error says besides
    content_type: str = "application/octet-stream"


def csv_body(csv: str) -> bytes:
    return json.dumps({"csv": csv, "meta": {"name": "attack"}}).encode()


CSV_HEADER = "item_number,condition_name,region_number,region_name,content\n"
SUITES = "/api/suites/"
CSV = "/api/validate/suite/?as=csv"
PAIRS = "/api/minimal-pairs/?name=attack&filename="
PROBING = "/api/probing-tasks/?name=attack&task_type=custom"
PREDICTIONS = "/api/minimal-pairs/small/predictions/?model=m&register=1"

ATTACKS = {
    # Suites, JSON: 6.7 million `{}` once took 6 GB (every one a schema error, kept).
    "suite: tiny values": Attack(
        "suite",
        SUITES,
        lambda: repeated(suite_text("")[:-2], "{}, ", "{}]}"),
        "GYM_UPLOAD_MAX_VALUES",
        content_type="application/json",
    ),
    "suite: a region numbered 9,999,999,999": Attack(
        "suite",
        SUITES,
        lambda: suite_text(ITEM % (1, REGION % "w"), '"1": "a", "9999999999": "b"').encode(),
        "",
        "regions 2, 3, 4, 5, 6, 7, 8, 9, 10 and 11 are missing (and 9,999,999,987 more)",
        content_type="application/json",
    ),
    "suite: regions by conditions": Attack(
        "suite",
        SUITES,
        suite_region_bomb,
        "",
        "more errors not shown",
        content_type="application/json",
    ),
    "suite: one huge field": Attack(
        "suite",
        SUITES,
        lambda: suite_text(ITEM % (1, REGION % ("w" * 19 * MB))).encode(),
        "GYM_UPLOAD_MAX_FIELD_CHARS",
        content_type="application/json",
    ),
    "suite: deep nesting": Attack(
        "suite",
        SUITES,
        lambda: suite_text(ITEM % (1, REGION % "w"), meta=f', "x": {deep(500)}').encode(),
        "GYM_UPLOAD_MAX_JSON_DEPTH",
        content_type="application/json",
    ),
    # Suites, CSV (the grid editor's check, open to anyone): 2 MB of rows once took 4.5 GB.
    "csv: many tiny rows": Attack(
        "csv",
        CSV,
        lambda: csv_body(CSV_HEADER + "".join(f"{i},c,1,r,w\n" for i in range(400_000))),
        "GYM_UPLOAD_MAX_VALUES",
        content_type="application/json",
    ),
    "csv: blank lines": Attack(
        "csv",
        CSV,
        lambda: csv_body(CSV_HEADER + "\n" * 9_000_000),
        "GYM_UPLOAD_MAX_ROWS",
        content_type="application/json",
    ),
    "csv: one huge line": Attack(
        "csv",
        CSV,
        lambda: csv_body(CSV_HEADER + "1,c,1,r," + "w," * 9_000_000),
        "GYM_UPLOAD_MAX_LINE_CHARS",
        content_type="application/json",
    ),
    "csv: one huge field": Attack(
        "csv",
        CSV,
        lambda: csv_body(CSV_HEADER + "1,c,1,r," + "w" * 500_000 + "\n"),
        "GYM_UPLOAD_MAX_FIELD_CHARS",
        content_type="application/json",
    ),
    "csv: a region numbered 10**11": Attack(
        "csv",
        CSV,
        lambda: csv_body(CSV_HEADER + "1,c,1,r,w\n1,c,99999999999,s,w\n"),
        "",
        "(and 99,999,999,987 more)",
        content_type="application/json",
    ),
    # Minimal-pair sets.
    "parquet: five million rows in 300 KB": Attack(
        "pairs",
        PAIRS + "a.parquet",
        lambda: parquet_bomb(5_000_000, 200),
        "GYM_UPLOAD_MAX_ROWS",
    ),
    "parquet: one text unpacked 400,000 times": Attack(
        "pairs",
        PAIRS + "a.parquet",
        lambda: parquet_bomb(400_000, 100_000),
        "GYM_UPLOAD_MAX_UNPACKED_BYTES",
    ),
    "parquet: a list of 3.5 million values": Attack(
        "pairs",
        PAIRS + "a.parquet",
        lambda: parquet_long_list(3_500_000),
        "GYM_UPLOAD_MAX_VALUES",
    ),
    "parquet: twenty thousand columns": Attack(
        "pairs",
        PAIRS + "a.parquet",
        lambda: parquet_wide(20_000),
        "GYM_UPLOAD_MAX_PARQUET_META_BYTES",
    ),
    "tsv: many tiny rows": Attack(
        "pairs",
        PAIRS + "a.tsv",
        lambda: repeated("sentid\tsentence\n", "1\tw\n"),
        "GYM_UPLOAD_MAX_ROWS",
    ),
    "tsv: one huge field": Attack(
        "pairs",
        PAIRS + "a.tsv",
        lambda: ("sentid\tsentence\n1\t" + "w" * 500_000).encode(),
        "GYM_UPLOAD_MAX_FIELD_CHARS",
    ),
    "jsonl: one huge line": Attack(
        "pairs",
        PAIRS + "a.jsonl",
        lambda: json.dumps({"sentence_good": "a " * 9 * MB, "sentence_bad": "b"}).encode(),
        "GYM_UPLOAD_MAX_LINE_CHARS",
    ),
    "jsonl: one huge field": Attack(
        "pairs",
        PAIRS + "a.jsonl",
        lambda: json.dumps({"sentence_good": "a" * 500_000, "sentence_bad": "b"}).encode(),
        "GYM_UPLOAD_MAX_FIELD_CHARS",
    ),
    "jsonl: many tiny pairs": Attack(
        "pairs",
        PAIRS + "a.jsonl",
        lambda: repeated("", '{"sentence_good":"a","sentence_bad":"b"}\n'),
        "GYM_UPLOAD_MAX_VALUES",
    ),
    "jsonl: a million condition fields": Attack(
        "pairs",
        PAIRS + "a.jsonl",
        lambda: "".join(
            json.dumps(
                {"sentence_good": "a", "sentence_bad": "b", **{f"k{i}.{j}": 1 for j in range(100)}}
            )
            + "\n"
            for i in range(10_000)
        ).encode(),
        "GYM_UPLOAD_MAX_VALUES",
    ),
    "jsonl: deep nesting": Attack(
        "pairs",
        PAIRS + "a.jsonl",
        lambda: ('{"sentence_good": ' + deep(400_000) + "}").encode(),
        "",
        "nested too deeply",
    ),
    "txt: many tiny lines": Attack(
        "pairs",
        PAIRS + "a.txt&file_format=zorro",
        lambda: repeated("", "a\n"),
        "GYM_UPLOAD_MAX_ROWS",
    ),
    # Probing tasks.
    "probing: one huge line": Attack(
        "probing",
        PROBING,
        lambda: repeated("tr\ta\t", "w "),
        "GYM_UPLOAD_MAX_LINE_CHARS",
    ),
    "probing: one huge field": Attack(
        "probing",
        PROBING,
        lambda: ("tr\ta\t" + "w" * 500_000 + "\n").encode(),
        "GYM_UPLOAD_MAX_FIELD_CHARS",
    ),
    "probing: many tiny rows": Attack(
        "probing",
        PROBING,
        lambda: repeated("", "tr\ta\tw\n"),
        "GYM_UPLOAD_MAX_ROWS",
    ),
    # Predictions files.
    "predictions: many tiny rows": Attack(
        "predictions",
        PREDICTIONS,
        lambda: repeated(PREDICTIONS_HEADER, "a\t1\ta\t0\tm\tt\tTrue\t1\t1\n"),
        "GYM_UPLOAD_MAX_ROWS",
    ),
    "predictions: one huge field": Attack(
        "predictions",
        PREDICTIONS,
        lambda: (PREDICTIONS_HEADER + "a" * 500_000 + "\t1\ta\t0\tm\tt\tTrue\t1\t1\n").encode(),
        "GYM_UPLOAD_MAX_FIELD_CHARS",
    ),
}


def stored() -> dict[str, int]:
    """The rows every upload could have written."""
    from evaluations.models import PairEvaluation, PairSentenceTokens
    from suites import models as data

    models = (
        data.Suite, data.Item, data.MinimalPairSet, data.PairSetSentence, data.ProbingTask,
        data.ProbingInstance, PairEvaluation, PairSentenceTokens,
    )  # fmt: skip
    return {model.__name__: model.objects.count() for model in models}


def answer(url: str, body: bytes, content_type: str, user_id: int) -> dict[str, Any]:
    """(In the child) the API's answer to one upload: its status and error messages."""
    from django.contrib.auth.models import User

    client = token_client(User.objects.get(pk=user_id))
    response = client.post(url, data=body, content_type=content_type)
    shown = response.json() if response["Content-Type"].startswith("application/json") else {}
    return {"status": response.status_code, "errors": [e["message"] for e in shown["errors"]]}


def small_pair_set(owner: Any) -> None:
    from suites.minimal_pairs.sets import minimal_pair_set_import

    minimal_pair_set_import(
        data=b"sentid\tpairid\tcomparison\tsentence\n1\t1\texpected\ta b .\n"
        b"2\t1\tunexpected\tb a .\n",
        name="small",
        owner=owner,
    )


@pytest.mark.parametrize("name", list(ATTACKS))
def test_an_attack_is_refused_naming_its_limit_stores_nothing_and_stays_under_the_cap(
    name: str, alice
) -> None:
    attack = ATTACKS[name]
    if attack.kind == "predictions":
        small_pair_set(alice)
    body = attack.body()
    assert len(body) <= BODY
    before = stored()
    run = memory_cap.run_capped(
        answer, (attack.url, body, attack.content_type, alice.pk), cap_mb=CAP_MB[attack.kind]
    )
    assert run.within_cap, run
    reply = run.result()
    # The grid editor's check answers 200 with its errors (it never stores); every other
    # upload answers 400.
    assert reply["status"] == (200 if attack.url == CSV else 400), reply
    messages = " | ".join(reply["errors"])
    assert reply["errors"] and attack.setting in messages and attack.words in messages
    assert stored() == before


# ---------------------------------------------------------------- fuzzed uploads

# Derandomized: the same examples every run, so that a run fails only for a change.
FUZZ = settings(
    max_examples=60,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
# Whole fuzz runs (hypothesis itself included) stay far under an attack's cap.
FUZZ_CAP_MB = 300
PIECES = st.one_of(
    st.sampled_from(
        ['"', "{", "}", "[", "]", ",", ":", "\t", "\n", "\r", "\\", "\x00", "\ufeff", "\ud800",
         "True", "False", "-1", "99999999999", "1e400", "NaN", "-Infinity", "9" * 5000,
         "null", "é", "\u2028", " "]
    ),
    st.text(max_size=12),
)  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, seed: str) -> bytes:
    """`seed` with a few insertions, deletions and repeats; as UTF-8, a lone surrogate
    kept as the bytes that are not UTF-8."""
    text = seed
    for _ in range(draw(st.integers(0, 5))):
        start = draw(st.integers(0, len(text)))
        end = draw(st.integers(start, min(len(text), start + 40)))
        kind = draw(st.sampled_from(["insert", "delete", "repeat"]))
        if kind == "insert":
            text = text[:start] + draw(PIECES) + text[start:]
        elif kind == "delete":
            text = text[:start] + text[end:]
        else:
            text = text[:end] + text[start:end] * draw(st.integers(1, 50)) + text[end:]
    return text.encode("utf-8", "surrogatepass")


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)


@st.composite
def replaced(draw: st.DrawFn, seed: str, lines: bool) -> bytes:
    """The JSON `seed` (with `lines`, a JSON Lines file: its first line) with one value
    somewhere in it replaced by any JSON value."""
    first, _, rest = seed.partition("\n") if lines else (seed, "", "")
    data = json.loads(first)
    parent: Any = None
    key: Any = None
    node: Any = data
    for _ in range(draw(st.integers(1, 7))):
        if not isinstance(node, dict | list) or not node:
            break
        keys = sorted(node) if isinstance(node, dict) else list(range(len(node)))
        parent, key = node, draw(st.sampled_from(keys))
        node = parent[key]
    if parent is not None:
        parent[key] = draw(JSON_VALUES)
    return (json.dumps(data) + ("\n" + rest if rest else "")).encode()


def uploads(seed: str, *, json_kind: str = "") -> st.SearchStrategy[bytes]:
    """Bytes, and the seed mutated; for `json_kind` "document" or "lines", also the seed
    with a value replaced."""
    shapes = [st.binary(max_size=3000), mutated(seed)]
    if json_kind:
        shapes.append(replaced(seed, json_kind == "lines"))
    return st.one_of(*shapes)


def located(errors: list[Any]) -> None:
    """Every error says where (a path, a row or the file) and what."""
    assert errors
    for error in errors:
        assert str(error.path).strip() and str(error.message).strip(), error


def imported_or_located(call: Callable[[], object]) -> None:
    """`call` (a service) imports, or refuses with located errors; anything else it
    raises (a 500, as the API would answer it) fails the test. What it wrote is undone."""
    from evaluations.minimal_pairs.services import PredictionsInvalid
    from suites.minimal_pairs.sets import PairSetInvalid
    from suites.probing.services import ProbingTaskInvalid
    from suites.syntaxgym.services import SuiteInvalid

    try:
        with transaction.atomic():
            call()
            transaction.set_rollback(True)
    except (SuiteInvalid, PairSetInvalid, ProbingTaskInvalid, PredictionsInvalid) as exc:
        located(exc.errors)


def seed_text(*parts: str) -> str:
    return (SHARED_DATA.joinpath(*parts)).read_text(encoding="utf-8")


def fuzz_suites() -> None:
    from suites.syntaxgym.services import suite_import

    seed = seed_text("syntaxgym-misc", "syntaxgym-core__docs__sample_suite.json")

    @FUZZ
    @given(uploads(seed, json_kind="document"))
    def run(body: bytes) -> None:
        imported_or_located(lambda: suite_import(source=body, owner=None, rename_if_taken=True))

    run()


def fuzz_suite_csv() -> None:
    from suites import formats
    from suites.catalog_services import upload_limits

    suite = formats.parse_suite_text(
        seed_text("syntaxgym-misc", "syntaxgym-core__docs__sample_suite.json")
    ).suite
    assert suite is not None
    seed = formats.to_csv_text(suite)

    @FUZZ
    @given(uploads(seed))
    def run(body: bytes) -> None:
        result = formats.parse_suite_csv(body, meta={"name": "fuzz"}, limits=upload_limits())
        if result.suite is None:
            located(result.errors)

    run()


PAIR_SEEDS = {
    "data.tsv": seed_text("nlpscholar", "data", "minimal_pairs.tsv"),
    "pairs.jsonl": "".join(
        json.dumps({"sentence_good": f"The dog{n} runs .", "sentence_bad": f"The dog{n} run .",
                    "UID": "agreement", "pairID": str(n)}) + "\n"
        for n in range(5)
    ),
    "agreement.txt": "True\tThe dog runs .\nFalse\tThe dog run .\nFalse\tThe dogs runs .\n",
    "zorro.txt": "the dog run .\nthe dog runs .\nthe cats runs .\nthe cats run .\n",
    "syneval.tsv": "grammatical\tungrammatical\tcase\nthe dog runs\tthe dog run\tsimple\n",
}  # fmt: skip


def fuzz_pair_sets() -> None:
    from suites.minimal_pairs.sets import minimal_pair_set_import

    @FUZZ
    @given(
        st.sampled_from(sorted(PAIR_SEEDS)).flatmap(
            lambda f: st.tuples(
                st.just(f),
                uploads(PAIR_SEEDS[f], json_kind="lines" if f.endswith(".jsonl") else ""),
            )
        )
    )
    def run(named: tuple[str, bytes]) -> None:
        filename, body = named
        imported_or_located(
            lambda: minimal_pair_set_import(
                data=body, name="fuzz", owner=None, filename=filename, rename_if_taken=True
            )
        )

    run()


CELLS = st.one_of(
    st.none(), st.text(max_size=20), st.integers(), st.lists(st.text(max_size=5), max_size=3)
)


@st.composite
def parquet_files(draw: st.DrawFn) -> bytes:
    """A small Parquet file of the fields data sets use (and others), or one's bytes
    with a few overwritten."""
    names = draw(
        st.lists(
            st.sampled_from(
                ["sentence_good", "sentence_bad", "pairID", "UID", "good_sentence", "bad_sentence",
                 "sen", "wrong_sen", "sentid", "paradigm", "x"]
            ),
            min_size=1, max_size=5, unique=True,
        )
    )  # fmt: skip
    rows = draw(st.integers(0, 5))
    columns = {name: draw(st.lists(CELLS, min_size=rows, max_size=rows)) for name in names}
    try:
        data = parquet(columns)
    except Exception:  # noqa: BLE001 - pyarrow refuses a column of mixed types: draw another
        data = parquet({"sentence_good": ["a"] * rows, "sentence_bad": ["b"] * rows})
    flips = draw(
        st.lists(st.tuples(st.integers(0, len(data) - 1), st.integers(0, 255)), max_size=3)
    )
    for at, value in flips:
        data = data[:at] + bytes([value]) + data[at + 1 :]
    return data


def fuzz_parquet() -> None:
    from suites.minimal_pairs.sets import minimal_pair_set_import

    @FUZZ
    @given(parquet_files(), st.sampled_from(["", "blimp", "jblimp", "zorro"]))
    def run(body: bytes, file_format: str) -> None:
        imported_or_located(
            lambda: minimal_pair_set_import(
                data=body, name="fuzz", owner=None, filename="fuzz.parquet",
                rename_if_taken=True, file_format=file_format,
            )
        )  # fmt: skip

    run()


def probing_seed() -> str:
    lines = seed_text("senteval-probing", "bigram_shift.txt").splitlines(keepends=True)
    return "".join(
        [line for line in lines if line.startswith("tr")][:6]
        + [line for line in lines if line.startswith(("va", "te"))][:4]
    )


def fuzz_probing() -> None:
    from suites.probing.services import probing_task_import

    @FUZZ
    @given(uploads(probing_seed()), st.sampled_from(["custom", "bigram_shift", "word_content"]))
    def run(body: bytes, task_type: str) -> None:
        name = f"fuzz-{random.choice(string.ascii_lowercase)}"
        imported_or_located(
            lambda: probing_task_import(
                source=body, name=name, owner=None, task_type=task_type, rename_if_taken=True
            )
        )

    run()


def fuzz_predictions() -> None:
    from evaluations.minimal_pairs.services import pair_predictions_import
    from suites.models import MinimalPairSet

    pair_set = MinimalPairSet.objects.get(name="small")
    seed = seed_text("nlpscholar", "predictions", "minimal_pairs_bad.tsv")

    @FUZZ
    @given(uploads(seed))
    def run(body: bytes) -> None:
        imported_or_located(
            lambda: pair_predictions_import(
                pair_set=pair_set, model_name="fuzz", register=True, data=body, user=None,
                check_permission=False,
            )
        )  # fmt: skip

    run()


@pytest.mark.parametrize(
    "fuzz",
    [fuzz_suites, fuzz_suite_csv, fuzz_pair_sets, fuzz_parquet, fuzz_probing, fuzz_predictions],
    ids=lambda f: f.__name__,
)
def test_fuzzed_uploads_import_or_get_located_errors_in_bounded_memory(
    fuzz: Callable[[], None], alice
) -> None:
    from suites.minimal_pairs.sets import minimal_pair_set_import

    minimal_pair_set_import(
        data=seed_text("nlpscholar", "data", "minimal_pairs_bad.tsv").encode(),
        name="small",
        owner=alice,
        drop_incomplete_pairs=True,
    )
    run = memory_cap.run_capped(fuzz, cap_mb=FUZZ_CAP_MB)
    run.result()
    assert run.within_cap, run


def test_the_settings_the_defaults_and_the_docs_agree() -> None:
    from suites.catalog_services import upload_limits
    from suites.formats.limits import DEFAULT_LIMITS, SETTINGS
    from tests.conftest import REPO

    assert upload_limits() == DEFAULT_LIMITS
    docs = (REPO / "docs" / "configuration.md").read_text(encoding="utf-8")
    for limit, name in SETTINGS.items():
        value = getattr(DEFAULT_LIMITS, limit)
        shown = f"{value // MB} MB" if value >= MB and not value % MB else f"{value:,}"
        row = next(line for line in docs.splitlines() if line.startswith(f"| `{name}` |"))
        assert row.endswith(f"| {shown} |"), (row, shown)


def test_a_nul_byte_in_a_probing_file_is_a_located_error(alice) -> None:
    # Found by the fuzz test on PostgreSQL, whose text columns hold no NUL: a 500 there.
    from suites.models import ProbingTask
    from tests.conftest import token_client

    body = b"tr\tA\tone two .\nte\tB\tthree\x00 four .\n"
    response = token_client(alice).post(
        "/api/probing-tasks/?name=nul&filename=nul.txt", body, content_type="text/plain"
    )
    assert response.status_code == 400, response.content
    assert "a NUL byte at character" in response.content.decode()
    assert ProbingTask.objects.count() == 0
