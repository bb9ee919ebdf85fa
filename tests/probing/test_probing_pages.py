"""Probing task pages and API: list with search/tag/type, the task page (counts, length
plot data, examples), upload with located errors, and hostile input."""

from __future__ import annotations

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from suites.models import ProbingTask
from suites.probing.services import probing_task_import
from tests.conftest import token_client
from tests.probing.conftest import sample

pytestmark = pytest.mark.django_db
SMALL = 'tr\tA\tsay " hi " .\ntr\tB\ttwo words here .\nva\tA\tone .\nte\tB\tthree more words .\n'


def test_list_search_tag_and_type(anon_client, alice) -> None:
    probing_task_import(source=sample("past_present"), name="past_present", owner=alice)
    probing_task_import(
        source=SMALL, name="mine", owner=alice, description="a needle", tags=["toy"]
    )
    page = anon_client.get("/probing/")
    assert page.status_code == 200
    text = page.content.decode()
    assert "past_present" in text and "mine" in text and "2 probing tasks" in text
    assert "needle" not in anon_client.get("/probing/?q=past").content.decode()
    only = anon_client.get("/probing/?tag=toy").content.decode()
    assert "1 probing task" in only and "a needle" in only
    assert "1 probing task" in anon_client.get("/probing/?type=past_present").content.decode()
    assert anon_client.get("/probing/?sort=bogus&page=999").status_code == 200


def test_task_page_counts_plot_data_and_examples(anon_client, alice) -> None:
    task = probing_task_import(
        source=sample("sentence_length"), name="sentence_length", owner=alice
    )
    page = anon_client.get("/probing/sentence_length/")
    assert page.status_code == 200
    text = page.content.decode()
    overview = page.context["overview"]
    assert [row["label"] for row in overview["rows"]] == ["0", "1", "2", "3", "4", "5"]
    assert all(row["tr"] == row["va"] == row["te"] == 25 for row in overview["rows"])
    assert overview["totals"]["total"] == 450 == task.instance_count
    lengths = overview["lengths"]
    # Label 0 holds 5-8 words only, label 5 26-28 words (SentEval's bins).
    words = lengths["words"]
    zero = dict(zip(words, lengths["series"][0]["counts"], strict=True))
    assert sum(zero.values()) == 75 and all(zero[n] == 0 for n in words if not 5 <= n <= 8)
    assert 'id="length-data"' in text and "probing-lengths.js" in text
    # Examples: filter by partition and label, paginated.
    te = anon_client.get("/probing/sentence_length/?partition=te&label=3")
    rows = te.context["page"].object_list
    assert len(rows) == 25 and {(r.partition, r.label) for r in rows} == {("te", "3")}
    assert anon_client.get("/probing/sentence_length/?partition=xx&page=-4").status_code == 200
    assert anon_client.get("/probing/no-such-task/").status_code == 404


def test_upload_page(alice_client, anon_client) -> None:
    assert anon_client.get("/probing/upload/").status_code == 302  # log in first
    assert alice_client.get("/probing/upload/").status_code == 200
    bad = SimpleUploadedFile("past_present.txt", b"tr\tPAST\ta .\nva\tPRES\tb .\n")
    response = alice_client.post_form("/probing/upload/", {"file": bad})
    assert response.status_code == 400
    text = response.content.decode()
    assert "line 2" in text and "never in" in text and "no test instances" in text
    assert ProbingTask.objects.count() == 0
    # The tags' limits are a suite's, said of the task.
    many = ",".join(f"t{n}" for n in range(21))
    tagged = SimpleUploadedFile("toy.tsv", SMALL.encode())
    response = alice_client.post_form("/probing/upload/", {"file": tagged, "tags": many})
    assert response.status_code == 400
    assert "the probing task would have 21 tags; keep the 20" in response.content.decode()
    assert ProbingTask.objects.count() == 0
    good = SimpleUploadedFile("toy.tsv", SMALL.encode())
    response = alice_client.post_form(
        "/probing/upload/", {"file": good, "tags": "Toy, senteval", "description": "d"}
    )
    assert response.status_code == 302 and response["Location"] == "/probing/toy/"
    task = ProbingTask.objects.get(name="toy")
    assert task.task_type == "custom" and task.owner is not None and task.owner.username == "alice"
    assert sorted(t.name for t in task.tags.all()) == ["senteval", "toy"]
    example = task.instances.get(line=1)
    assert example.sentence == 'say " hi " .'


def test_api_list_detail_and_upload(anon_client, alice) -> None:
    probing_task_import(source=sample("tree_depth"), name="tree_depth", owner=alice)
    body = anon_client.get("/api/probing-tasks/").json()
    assert body["count"] == 1 and body["results"][0]["task_type"] == "tree_depth"
    detail = anon_client.get("/api/probing-tasks/tree_depth/").json()
    assert detail["labels"] == ["5", "6", "7", "8", "9", "10", "11"]
    assert detail["overview"]["totals"]["total"] == 710
    assert anon_client.get("/api/probing-tasks/nope/").status_code == 404

    upload = SimpleUploadedFile("bigram_shift.txt", sample("bigram_shift").read_bytes())
    assert anon_client.post("/api/probing-tasks/", {"file": upload}).status_code == 401
    client = token_client(alice)
    upload = SimpleUploadedFile("bigram_shift.txt", sample("bigram_shift").read_bytes())
    created = client.post("/api/probing-tasks/", {"file": upload, "tags": "senteval"})
    assert created.status_code == 201, created.content
    assert created.json()["task_type"] == "bigram_shift"
    assert created.json()["instance_count"] == 699


def test_api_hostile_input_gets_4xx(alice, settings) -> None:
    client = token_client(alice)
    assert client.post("/api/probing-tasks/", {}).status_code == 400
    response = client.post(
        "/api/probing-tasks/", data=b"\x00\xff", content_type="application/octet-stream"
    )
    assert response.status_code == 400
    assert response.json()["errors"][0]["message"] == "the probing task needs a name"
    binary = SimpleUploadedFile("x.txt", bytes(range(256)) * 10)
    response = client.post("/api/probing-tasks/", {"file": binary})
    assert response.status_code == 400
    assert any("UTF-8" in e["message"] for e in response.json()["errors"])
    weird = SimpleUploadedFile("y.txt", SMALL.encode())
    response = client.post(
        "/api/probing-tasks/", {"file": weird, "task_type": "tense", "name": "a/b"}
    )
    assert response.status_code == 400
    settings.GYM_MAX_UPLOAD_BYTES = 10
    big = SimpleUploadedFile("z.txt", SMALL.encode())
    assert client.post("/api/probing-tasks/", {"file": big}).status_code == 413
    assert ProbingTask.objects.count() == 0
    schema = client.get("/api/schema/")
    assert schema.status_code == 200 and b"probing-tasks" in schema.content
    unknown_type = client.get("/api/probing-tasks/?type=zzz")
    assert unknown_type.status_code == 200
    assert unknown_type.json() == {"count": 0, "next": None, "previous": None, "results": []}
