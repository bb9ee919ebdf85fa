"""Corpora: import by command, page and API; streamed to a file named by its content
hash; errors name the line and keep nothing; a stable held-out split."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command

from suites.corpora import reading
from suites.corpora.models import Corpus
from suites.corpora.services import CorpusInvalid, corpus_histogram, corpus_import
from tests.conftest import token_client

pytestmark = pytest.mark.django_db


@pytest.fixture(autouse=True)
def corpus_dir(settings, tmp_path):
    settings.GYM_CORPUS_DIR = tmp_path / "corpora"
    return settings.GYM_CORPUS_DIR


def write(path: Path, data: bytes, *, gz: bool = False) -> Path:
    path.write_bytes(gzip.compress(data) if gz else data)
    return path


TSV = b"sentid\ttext\tcondition\n1\tThe dog barks .\ta\n2\t  \tb\n3\tThe cats  sleep\tc\n"


def test_gzipped_tsv_by_command(tmp_path, alice, corpus_dir) -> None:
    path = write(tmp_path / "toy.train.tsv.gz", TSV, gz=True)
    out = io.StringIO()
    call_command("import_corpus", str(path), "--owner", "alice", "--tag", "Toy", stdout=out)
    corpus = Corpus.objects.get()
    normalised = b"The dog barks .\nThe cats  sleep\n"
    assert corpus.name == "toy.train"
    assert (corpus.source_format, corpus.gzipped, corpus.owner) == ("tsv", True, alice)
    assert (corpus.line_count, corpus.word_count, corpus.char_count) == (2, 7, 30)
    assert (corpus.blank_lines, corpus.bytes) == (1, len(normalised))
    assert corpus.content_hash == hashlib.sha256(normalised).hexdigest()
    assert corpus.path == corpus_dir / f"{corpus.content_hash}.txt"
    assert corpus.path.read_bytes() == normalised
    assert corpus.length_counts == {"3": 1, "4": 1}
    # File lines 2 and 4: the header is line 1, the blank line 3 is left out.
    assert corpus.sample == [[1, "The dog barks ."], [2, "The cats  sleep"]]
    assert [t.name for t in corpus.tags.all()] == ["toy"]
    # Two lines, 1%: one line is still held out.
    assert corpus.validation_lines == 1
    assert "imported 'toy.train' (2 lines, 7 words, 1 held out" in out.getvalue()
    # Only the corpus file is left in the folder (no temporary file).
    assert [p.name for p in corpus_dir.iterdir()] == [corpus.path.name]


def test_plain_text_same_text_same_file(tmp_path, corpus_dir) -> None:
    first = corpus_import(
        source=write(tmp_path / "a.txt", b"The dog barks .\r\nThe cats  sleep\n"),
        name="plain",
        owner=None,
    )
    second = corpus_import(
        source=write(tmp_path / "b.tsv.gz", TSV, gz=True), name="tsv", owner=None
    )
    assert first.source_format == "text" and not first.gzipped
    assert first.content_hash == second.content_hash
    assert first.file_name == second.file_name
    assert len(list(corpus_dir.iterdir())) == 1


@pytest.mark.parametrize(
    ("data", "name", "where", "message"),
    [
        (b"ok line\nbad \xff byte\n", "c.txt", "line 2", "not UTF-8 (byte 0xff at byte 5"),
        (b"ok\nfine\nnul\x00here\n", "c.txt", "line 3", "a NUL byte at character 4"),
        (
            b"sentid\tsentence\n1\tx\n",
            "c.tsv",
            "line 1",
            "a TSV corpus needs a column named 'text'",
        ),
        (
            b"text\tid\nfine\t1\nno id\n",
            "c.tsv",
            "line 3",
            "1 tab-separated fields; the header has 2",
        ),
        (b"\n  \n", "c.txt", "file", "no text"),
    ],
)
def test_errors_name_the_line_and_keep_nothing(
    tmp_path, corpus_dir, data, name, where, message
) -> None:
    path = write(tmp_path / f"{name}.gz", data, gz=True)
    with pytest.raises(CorpusInvalid) as caught:
        corpus_import(source=path, name="broken", owner=None)
    [error] = caught.value.errors
    assert error.path == where
    assert error.message.startswith(message)
    assert not Corpus.objects.exists()
    assert list(corpus_dir.iterdir()) == []


def test_limit_is_on_uncompressed_bytes(tmp_path, corpus_dir, settings) -> None:
    settings.GYM_MAX_CORPUS_BYTES = 1000
    path = write(tmp_path / "big.txt.gz", b"word " * 100 + b"\n" + b"a\n" * 600, gz=True)
    assert path.stat().st_size < 1000
    with pytest.raises(CorpusInvalid) as caught:
        corpus_import(source=path, name="big", owner=None)
    assert caught.value.errors[0].path == "line 251"
    assert "larger than 1,000 bytes uncompressed" in caught.value.errors[0].message
    assert list(corpus_dir.iterdir()) == []


def test_name_taken_keeps_nothing(tmp_path, corpus_dir) -> None:
    corpus_import(source=write(tmp_path / "a.txt", b"one\n"), name="c", owner=None)
    with pytest.raises(CorpusInvalid) as caught:
        corpus_import(source=write(tmp_path / "b.txt", b"two\n"), name="c", owner=None)
    assert caught.value.errors[0].message.startswith("a corpus named 'c' already exists")
    assert len(list(corpus_dir.iterdir())) == 1


def test_validation_split_is_stable_and_capped(tmp_path) -> None:
    lines = "".join(f"line {n}\n" for n in range(1, 5001)).encode()
    corpus = corpus_import(source=write(tmp_path / "c.txt", lines), name="c", owner=None)
    assert corpus.validation_lines == 50  # 1% of 5,000
    split = reading.Split(seed=corpus.validation_seed, threshold=corpus.validation_threshold)
    held = list(split.lines(reading.open_normalised(corpus.path), validation=True))
    kept = list(split.lines(reading.open_normalised(corpus.path), validation=False))
    assert len(held) == 50 and len(kept) == 4950
    assert sorted(held + kept, key=lambda s: int(s.split()[1])) == lines.decode().splitlines()
    # The same lines again, for a copy imported later; a capped split holds out fewer.
    again = corpus_import(source=write(tmp_path / "d.txt", lines), name="d", owner=None)
    assert again.validation_threshold == corpus.validation_threshold
    capped = corpus_import(
        source=write(tmp_path / "e.txt", lines), name="e", owner=None, validation_max=7
    )
    split = reading.Split(seed=0, threshold=capped.validation_threshold)
    capped_held = list(split.lines(reading.open_normalised(capped.path), validation=True))
    assert capped.validation_lines == 7 == len(capped_held)
    assert set(capped_held) <= set(held)
    other = reading.corpus_file_split(capped.path, seed=1)[0]
    assert set(other.lines(reading.open_normalised(capped.path), validation=True)) != set(held)


def test_histogram_buckets(tmp_path) -> None:
    text = "a\n" + "a b\n" * 3 + ("w " * 20 + "\n") + ("w " * 300 + "\n")
    corpus = corpus_import(source=write(tmp_path / "c.txt", text.encode()), name="c", owner=None)
    histogram = corpus_histogram(corpus)
    assert histogram["labels"][:3] == ["1", "2", "3"]
    assert dict(zip(histogram["labels"], histogram["counts"], strict=True)) == {
        **{str(n): 0 for n in range(3, 17)},
        "1": 1,
        "2": 3,
        "17-32": 1,
        "33-64": 0,
        "65-128": 0,
        "129-255": 0,
        "256+": 1,
    }


def test_upload_page_and_corpus_page(alice_client, anon_client, corpus_dir) -> None:
    upload = SimpleUploadedFile("kids.txt.gz", gzip.compress(b"look at the doggy\nwhere is it\n"))
    response = alice_client.post_form(
        "/corpora/upload/",
        {
            "file": upload,
            "name": "",
            "description": "CHILDES",
            "tags": "child",
            "validation_percent": "1",
        },
    )
    assert response.status_code == 302 and response["Location"] == "/corpora/kids/"
    page = anon_client.get("/corpora/kids/")
    assert page.status_code == 200
    html = page.content.decode()
    assert '<span id="corpus-lines">2</span> lines' in html
    assert '<span id="corpus-words">7</span> words' in html
    assert "look at the doggy" in html
    listing = anon_client.get("/corpora/").content.decode()
    assert 'href="/corpora/kids/"' in listing
    assert 'href="/corpora/"' in anon_client.get("/").content.decode()  # in the header
    # A bad file: 400, the line named, nothing kept.
    bad = SimpleUploadedFile("bad.txt", b"fine\n\xc3\x28\n")
    response = alice_client.post_form("/corpora/upload/", {"file": bad, "validation_percent": "1"})
    assert response.status_code == 400
    assert "line 2" in response.content.decode()
    assert Corpus.objects.count() == 1 and len(list(corpus_dir.iterdir())) == 1
    # Too many tags: the form says so of the corpus, and nothing is kept.
    many = ",".join(f"t{n}" for n in range(21))
    again = SimpleUploadedFile("more.txt", b"one line\n")
    response = alice_client.post_form(
        "/corpora/upload/", {"file": again, "tags": many, "validation_percent": "1"}
    )
    assert response.status_code == 400
    assert "the corpus would have 21 tags" in response.content.decode()
    assert Corpus.objects.count() == 1
    assert anon_client.get("/corpora/upload/").status_code == 302  # log in first
    assert anon_client.get("/corpora/nothing/").status_code == 404


def test_api_reads_a_gzipped_raw_body_as_it_arrives(alice, corpus_dir) -> None:
    # The raw body is a stream, not a seekable file: its first bytes are looked at (gzip
    # or not) without being taken from the lines.
    body = gzip.compress(b"text\tsource\nthe dog ran\tbook\nwhere is it\tbook\n")
    response = token_client(alice).post(
        "/api/corpora/?filename=kids.tsv.gz&tags=child", body, content_type="application/gzip"
    )
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["name"], data["source_format"], data["gzipped"]) == ("kids", "tsv", True)
    assert (data["line_count"], data["word_count"], data["tags"]) == (2, 6, ["child"])
    stored = corpus_dir / Corpus.objects.get().file_name
    assert stored.read_text() == "the dog ran\nwhere is it\n"


def test_api(alice_client, anon_client) -> None:
    token_free = {"HTTP_X_CSRFTOKEN": alice_client.csrf_token()}
    body = {"file": SimpleUploadedFile("c.tsv", b"text\nhello world\n"), "tags": "a,b"}
    response = alice_client.post("/api/corpora/", body, **token_free)
    assert response.status_code == 201, response.content
    data = response.json()
    assert (data["name"], data["line_count"], data["word_count"], data["tags"]) == (
        "c",
        1,
        2,
        ["a", "b"],
    )
    assert data["histogram"] == {"labels": ["1", "2"], "counts": [0, 1]}
    assert anon_client.get("/api/corpora/").json()["results"][0]["name"] == "c"
    assert anon_client.get("/api/corpora/c/").json()["sample"] == [[1, "hello world"]]
    assert anon_client.get("/api/corpora/nope/").status_code == 404
    hostile = {"file": SimpleUploadedFile("d.txt", b"x\n"), "validation_fraction": "lots"}
    response = alice_client.post("/api/corpora/", hostile, **token_free)
    assert response.status_code == 400
    assert response.json()["errors"] == [
        {
            "code": "invalid",
            "message": "A valid number is required.",
            "path": "$.validation_fraction",
        }
    ]
    hostile = {"file": SimpleUploadedFile("d.txt", b"x\n"), "validation_fraction": "2"}
    response = alice_client.post("/api/corpora/", hostile, **token_free)
    assert response.status_code == 400
    assert response.json()["errors"][0]["path"] == "validation_fraction"
    assert alice_client.post("/api/corpora/", {}, **token_free).status_code == 400
    assert anon_client.post("/api/corpora/", {}).status_code in (401, 403)
    assert json.loads(anon_client.get("/api/corpora/?ordering=words").content)["count"] == 1


def test_sample_lines_are_cut_to_the_setting_in_the_api_and_on_the_page(
    alice, anon_client, settings
) -> None:
    # One long line made the detail answer (and the page, and the row) as long as it.
    long = " ".join(f"w{n}" for n in range(40_000))
    text = f"text\nshort line\n{long}\n".encode()
    upload = token_client(alice).post("/api/corpora/?name=long", text, content_type="text/plain")
    assert upload.status_code == 201, upload.content
    cut = [[1, "short line"], [2, long[:500] + "…"]]  # GYM_SAMPLE_LINE_CHARS's default
    assert upload.json()["sample"] == cut
    assert anon_client.get("/api/corpora/long/").json()["sample"] == cut
    assert Corpus.objects.get().sample == cut
    page = anon_client.get("/corpora/long/").content.decode()
    assert cut[1][1] in page and long[:501] not in page
    # A row stored whole (before the cut was made when it is stored) is answered cut too,
    # to the setting's length.
    Corpus.objects.update(sample=[[2, long]])
    settings.GYM_SAMPLE_LINE_CHARS = 10
    assert anon_client.get("/api/corpora/long/").json()["sample"] == [[2, long[:10] + "…"]]
    assert f"{long[:10]}…" in anon_client.get("/corpora/long/").content.decode()


def test_command_reports_the_line(tmp_path) -> None:
    path = write(tmp_path / "c.tsv", b"id\n1\n")
    err = io.StringIO()
    with pytest.raises(CommandError):
        call_command("import_corpus", str(path), stderr=err)
    assert "line 1 a TSV corpus needs a column named 'text'" in err.getvalue().replace(":", "")


def test_an_upload_is_in_the_artifact_store_before_its_row(alice, corpus_dir) -> None:
    from gym import artifacts

    response = token_client(alice).post(
        "/api/corpora/?filename=s.txt", b"the dog ran\n", content_type="text/plain"
    )
    assert response.status_code == 201, response.content
    corpus = Corpus.objects.get()
    assert corpus.artifact_key == f"corpora/{corpus.content_hash}"
    assert b"".join(artifacts.stream(corpus.artifact_key)) == b"the dog ran\n"
    assert hashlib.sha256(b"the dog ran\n").hexdigest() == corpus.content_hash


def test_an_unreachable_store_answers_503_and_keeps_nothing(alice, corpus_dir, settings) -> None:
    from gym import artifacts

    # An S3 store whose endpoint answers nothing (a closed port of this machine).
    settings.STORAGES = {
        **settings.STORAGES,
        "artifacts": artifacts.artifact_storage(
            "s3://gym/artifacts", corpus_dir, endpoint="http://127.0.0.1:9", region="us-east-1"
        ),
    }
    settings.GYM_ARTIFACTS_URL = "s3://gym/artifacts"
    response = token_client(alice).post(
        "/api/corpora/?filename=s.txt", b"the dog ran\n", content_type="text/plain"
    )
    assert response.status_code == 503, response.content
    error = response.json()["errors"][0]
    assert error["code"] == "store_unavailable"
    assert "s3://gym/artifacts (http://127.0.0.1:9) could not be reached" in error["message"]
    assert "Nothing was kept" in error["message"]
    assert response["Retry-After"] == "5"
    assert not Corpus.objects.exists()
    assert not corpus_dir.exists() or [p.name for p in corpus_dir.iterdir()] == []
