"""Reading SentEval probing files: the ten real samples, and every way a file can be wrong."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from suites.formats.probing import (
    SENTEVAL_LABELS,
    TASK_TYPES,
    ProbingFormatError,
    ProbingReader,
    guess_task_type,
    iter_probing,
    load_probing_file,
    read_probing,
    sentence_length_label,
    sort_labels,
)
from tests.probing.conftest import sample

# word_content's sample is three windows of a 1000-class file: most of its va and te
# words never occur in its tr window, so it is (rightly) rejected; see the test below.
TASKS = sorted(name for name in SENTEVAL_LABELS if name != "word_content")


def count_by_hand(path: Path) -> tuple[Counter[str], Counter[str], int]:
    labels: Counter[str] = Counter()
    partitions: Counter[str] = Counter()
    lines = 0
    for line in path.read_text(encoding="utf-8").splitlines():
        fields = line.split("\t")
        partitions[fields[0]] += 1
        labels[fields[1]] += 1
        lines += 1
    return labels, partitions, lines


@pytest.mark.parametrize("task", TASKS)
def test_every_real_sample_reads_with_its_documented_labels(task: str) -> None:
    path = sample(task)
    result = load_probing_file(path)
    assert result.summary.task_type == task
    labels, partitions, lines = count_by_hand(path)
    assert len(result.instances) == lines
    assert {name: sum(c.values()) for name, c in result.summary.counts.items()} == dict(partitions)
    total = Counter[str]()
    for counter in result.summary.counts.values():
        total.update(counter)
    assert total == labels
    allowed = SENTEVAL_LABELS[task]
    if allowed is not None:
        assert set(labels) <= allowed
    assert all(instance.sentence and instance.extra == () for instance in result.instances)


def test_real_label_counts_match_source_notes() -> None:
    counts = load_probing_file(sample("tree_depth")).summary.counts
    merged = Counter[str]()
    for counter in counts.values():
        merged.update(counter)
    assert merged == {"5": 48, "6": 106, "7": 98, "8": 132, "9": 113, "10": 123, "11": 90}
    top = load_probing_file(sample("top_constituents")).summary
    assert len(top.labels) == 20 and set(top.labels) == SENTEVAL_LABELS["top_constituents"]
    lengths = load_probing_file(sample("sentence_length"))
    assert lengths.summary.labels == ["0", "1", "2", "3", "4", "5"]
    # The documented bins agree with the real lines' token counts.
    assert all(sentence_length_label(item.n_words) == item.label for item in lengths.instances)


def test_word_content_sample_fails_on_its_unseen_words() -> None:
    path = sample("word_content")
    seen: set[str] = set()
    unseen: set[tuple[str, str]] = set()
    for line in path.read_text(encoding="utf-8").splitlines():
        partition, label = line.split("\t")[:2]
        if partition == "tr":
            seen.add(label)
        elif label not in seen:
            unseen.add((partition, label))
    result = read_probing(path, task_type="word_content")
    assert not result.ok and result.instances == []
    # 200 errors are listed (one per unseen word and partition), then one line counts the rest.
    assert len(unseen) > 200 and len(result.errors) == 201
    assert result.errors[-1].message.startswith(f"… and {len(unseen) - 200} more errors")
    lines = [int(error.path.split()[1]) for error in result.errors[:-1]]
    assert lines == sorted(lines)
    # Keeping only the training lines, every word is valid: the words themselves pass.
    only_tr = "".join(
        line
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True)
        if line.startswith("tr\t")
    )
    errors = [str(e) for e in read_probing(only_tr, task_type="word_content").errors]
    assert len(errors) == 2 and all(e.startswith("file: no ") for e in errors)


def test_raw_double_quotes_are_kept() -> None:
    # The stream yields every well-formed line even where the file as a whole fails.
    instances = list(iter_probing(sample("word_content"), ProbingReader("word_content")))
    assert len(instances) == 593
    quoted = [item.sentence for item in instances if item.sentence.startswith('" ')]
    assert '" Preston , is that you ? "' in quoted


def test_the_same_content_gives_the_same_hash() -> None:
    path = sample("bigram_shift")
    text = path.read_text(encoding="utf-8")
    one = read_probing(path, task_type="bigram_shift").summary.content_hash
    two = read_probing(text.replace("\n", "\r\n"), task_type="bigram_shift").summary
    assert one == two.content_hash
    other = read_probing(text.replace("\tO\t", "\tI\t", 1), task_type="bigram_shift")
    assert other.summary.content_hash != one


GOOD = "tr\tA\tone two .\ntr\tB\tthree four .\nva\tA\tfive .\nte\tB\tsix seven .\n"


def errors_of(text: str, task_type: str = "custom") -> list[str]:
    result = read_probing(text, task_type=task_type)
    assert result.instances == [] or result.ok
    return [str(error) for error in result.errors]


def test_a_small_custom_file_with_extra_columns() -> None:
    text = 'tr\tA\tx1\ty1\tsay " hi "\nva\tA\tx2\ty2\tone\nte\tA\tx3\ty3\ttwo\n'
    result = read_probing(text)
    assert result.ok
    assert result.instances[0].extra == ("x1", "y1")
    assert result.instances[0].sentence == 'say " hi "'
    assert result.summary.n_extra == 2


def test_all_errors_are_collected_with_line_numbers() -> None:
    text = (
        "tr\tA\tgood line .\n"
        "xx\tA\tbad partition .\n"
        "tr\tA\t   \n"
        "tr\t\tno label .\n"
        "tr only two fields\n"
        "tr\tA\textra\tcolumn count differs\n"
        "te\tZ\tunseen label .\n"
        "te\tZ\tunseen again .\n"
    )
    errors = errors_of(text)
    assert "line 2, field 1: partition 'xx' is not one of tr, va, te" in errors
    assert "line 3, field 3: the sentence is empty" in errors
    assert "line 4, field 2: the label is empty" in errors
    assert any(e.startswith("line 5: has 1 tab-separated field;") for e in errors)
    assert any(e.startswith("line 6: has 4 fields where the lines before have 3") for e in errors)
    assert any("no validation instances (partition 'va')" in e for e in errors)
    assert any(
        e.startswith("line 7: label 'Z' occurs in 'te' (2 lines, the first here) but never in 'tr'")
        for e in errors
    )
    assert len(errors) == 7


def test_missing_partitions_are_each_reported() -> None:
    errors = errors_of("tr\tA\tonly training .\n")
    assert len(errors) == 2
    assert "no test instances" in errors[1]


def test_senteval_label_sets_are_checked() -> None:
    errors = errors_of(GOOD, "past_present")
    assert errors[0].startswith("line 1, field 2: label 'A' is not one of past_present's labels")
    assert "PAST, PRES" in errors[0]
    ok = "tr\t5\ta .\ntr\t12\tb .\nva\t5\tc .\nte\t12\td .\n"
    assert errors_of(ok, "tree_depth") == []
    assert "not one of tree_depth's labels" in errors_of(ok.replace("12", "13"), "tree_depth")[0]
    assert "not one of sentence_length's labels" in errors_of(ok, "sentence_length")[0]


def test_word_content_rule() -> None:
    ok = "tr\tcat\tThe Cat sat .\nva\tcat\ta cat .\nte\tdog\tno dog here\ntr\tdog\tdog .\n"
    assert errors_of(ok, "word_content") == []
    twice = "tr\tcat\tcat and cat .\nva\tcat\tcat\nte\tcat\tcat\n"
    assert "occurs 2 times" in errors_of(twice, "word_content")[0]
    upper = "tr\tCat\tCat .\nva\tCat\tCat\nte\tCat\tCat\n"
    assert "one lower-case word" in errors_of(upper, "word_content")[0]


def test_bytes_encoding_and_blank_lines() -> None:
    data = GOOD.encode() + b"\n\ntr\tA\t\xff\xfe .\n"
    result = read_probing(data)
    assert [str(e) for e in result.errors] == [
        "line 7: not UTF-8 text (byte 6 of the line); save the file as UTF-8"
    ]
    assert read_probing("\ufeff" + GOOD + "\n\n").ok


def test_streaming_reader_yields_before_the_end() -> None:
    reader = ProbingReader("custom")
    stream = iter_probing(iter(GOOD.splitlines(keepends=True)), reader)
    first = next(stream)
    assert first.line == 1 and first.sentence == "one two ."
    rest = list(stream)
    assert len(rest) == 3 and reader.finish().ok


def test_load_raises_with_every_problem(tmp_path: Path) -> None:
    path = tmp_path / "obj_number.txt"
    path.write_text("tr\tNN\ta\nva\tXX\tb\nte\tNNS\tc\n")
    with pytest.raises(ProbingFormatError) as caught:
        load_probing_file(path)
    assert len(caught.value.errors) == 2
    assert str(path) in str(caught.value)


def test_names_and_helpers() -> None:
    assert guess_task_type("/x/tree_depth.txt") == "tree_depth"
    assert guess_task_type("my-task.tsv") == "custom"
    assert TASK_TYPES[-1] == "custom" and len(TASK_TYPES) == 11
    assert sort_labels(["10", "5", "B", "A"]) == ["5", "10", "A", "B"]
    with pytest.raises(ValueError, match="unknown probing task type"):
        ProbingReader("tense")


def test_a_hostile_file_keeps_few_errors_and_labels() -> None:
    bad_lines = "x\n" * 50_000
    result = read_probing(bad_lines)
    assert len(result.errors) == 201
    assert str(result.errors[-1]).startswith("file: … and 49803 more errors not shown")
    many = "".join(f"tr\tL{n}\ts .\n" for n in range(10_005)) + "va\tL1\ts .\nte\tL1\ts .\n"
    errors = [str(e) for e in read_probing(many).errors]
    assert len(errors) == 5
    assert errors[0].startswith("line 10001, field 2: more than 10,000 different labels")
