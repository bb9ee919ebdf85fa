"""Bring your own model (issue 44): a save_pretrained folder packed as .tar.gz, .tar or
.zip, or an ARPA file, uploaded through the API (multipart, or the raw body) and the
Register page; checked at once (every hostile upload a located 4xx with nothing kept),
then by a worker before it may run."""

from __future__ import annotations

import gzip
import io
import json
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest

from evaluations.language_models.uploads import UPLOADED_PREFIX
from evaluations.models import LanguageModel
from gym import artifacts
from tests.conftest import token_client
from tests.scoring.test_ngram import TINY_ARPA

pytestmark = pytest.mark.django_db

KB = 1024


@pytest.fixture(autouse=True)
def uploads_dir(settings, tmp_path_factory) -> Path:
    """This test's own uploads folder, inside the model folders (as the default is)."""
    folder = tmp_path_factory.mktemp("uploads")
    settings.GYM_UPLOADED_MODELS_DIR = str(folder)
    _STORE_BEFORE[folder] = set(artifacts.list_prefix(UPLOADED_PREFIX))
    return folder


# The uploads' keys in the artifact store (one store for the test process) when each
# test's uploads folder was made: what a test adds is the difference.
_STORE_BEFORE: dict[Path, set[str]] = {}


def files_of(folder: Path) -> dict[str, bytes]:
    return {
        p.relative_to(folder).as_posix(): p.read_bytes() for p in folder.rglob("*") if p.is_file()
    }


def tar_of(files: dict[str, bytes], *, gz: bool = True, top: str = "my-model") -> bytes:
    """`files` packed under the folder `top` ('' for none), as tar -czf would."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz" if gz else "w") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(f"{top}/{name}" if top else name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def zip_of(files: dict[str, bytes]) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in files.items():
            archive.writestr(name, data)
    return out.getvalue()


def upload(client, data: bytes, filename: str, **fields: str):
    """A multipart upload to the API, as curl -F file=@... sends it."""
    return client.post("/api/models/", {"file": _named(data, filename), **fields})


def _named(data: bytes, filename: str) -> io.BytesIO:
    handle = io.BytesIO(data)
    handle.name = filename
    return handle


def raw_upload(client, data: bytes, query: str, content_type: str = "application/gzip"):
    return client.post(f"/api/models/?{query}", data, content_type=content_type)


def assert_nothing_kept(folder: Path) -> None:
    """No row, no file in the uploads folder and nothing in the artifact store."""
    assert LanguageModel.objects.count() == 0
    assert list(folder.iterdir()) == [], "the upload left files behind"
    stored = set(artifacts.list_prefix(UPLOADED_PREFIX)) - _STORE_BEFORE[folder]
    assert not stored, f"the upload left {sorted(stored)} in the artifact store"


# -- accepted uploads ----------------------------------------------------------------


def test_a_tar_gz_upload_is_checking_at_once_and_owned(
    alice, bob, tiny_gpt2, uploads_dir, _private_broker, django_capture_on_commit_callbacks
) -> None:
    client = token_client(alice)
    sent = tar_of(files_of(tiny_gpt2))
    waiting = _private_broker("gpu")
    with django_capture_on_commit_callbacks(execute=True):
        response = upload(client, sent, "tiny-gpt2.tar.gz", description="Trained at home")
    assert response.status_code == 202, response.content
    answer = response.json()
    assert answer["name"] == "tiny-gpt2" and answer["display_name"] == "tiny-gpt2"
    assert (answer["status"], answer["reason"], answer["kind"]) == ("checking", "", "causal")
    assert answer["registered_by"] == "alice" and answer["description"] == "Trained at home"
    # Kept under its content hash, the archive's top folder dropped; no host path answered.
    model = LanguageModel.objects.get(name="tiny-gpt2")
    assert len(model.content_hash) == 64 and answer["content_hash"] == model.content_hash
    assert model.upload_key == model.content_hash
    assert files_of(uploads_dir / model.content_hash) == files_of(tiny_gpt2)
    assert str(uploads_dir) not in response.content.decode()
    # Its check waits on the gpu queue for a worker.
    assert _private_broker("gpu") == waiting + 1 and model.check_sent_at is not None
    # Anyone sees it (not hidden); bob may not run it before its check.
    assert token_client(bob).get("/api/models/tiny-gpt2/").json()["status"] == "checking"


def test_a_raw_zip_of_a_masked_model_and_the_hidden_option(
    alice, bob, tiny_bert, uploads_dir
) -> None:
    body = zip_of(files_of(tiny_bert))
    response = raw_upload(
        token_client(alice),
        body,
        "filename=bert.zip&hidden=true&display_name=My BERT",
        "application/zip",
    )
    assert response.status_code == 202, response.content
    assert response.json()["kind"] == "masked" and response.json()["is_hidden"] is True
    assert response.json()["name"] == "my-bert"
    # Hidden: its uploader sees it, nobody else (but staff).
    assert token_client(alice).get("/api/models/my-bert/").status_code == 200
    assert token_client(bob).get("/api/models/my-bert/").status_code == 404


@pytest.mark.parametrize("gz", [False, True], ids=["arpa", "arpa.gz"])
def test_an_arpa_file_plain_or_gzipped(alice, uploads_dir, gz: bool) -> None:
    text = TINY_ARPA.encode()
    body = gzip.compress(text) if gz else text
    name = "tri.arpa.gz" if gz else "tri.arpa"
    response = raw_upload(token_client(alice), body, f"filename={name}", "application/octet-stream")
    assert response.status_code == 202, response.content
    model = LanguageModel.objects.get(name="tri")
    assert (model.kind, model.status) == ("ngram", "checking")
    assert model.upload_key == f"{model.content_hash}/model.{'arpa.gz' if gz else 'arpa'}"
    assert (uploads_dir / model.upload_key).read_bytes() == body


def test_a_multipart_name_beside_the_file_names_the_model(alice, uploads_dir) -> None:
    """`POST /api/models/` with the multipart fields `file` and `name`, as
    `curl -F file=@model.arpa -F name=...` sends them."""
    client = token_client(alice)
    body = TINY_ARPA.encode()
    bad = upload(client, body, "model.arpa", name="no spaces here")
    assert bad.status_code == 400, bad.content
    assert [e["path"] for e in bad.json()["errors"]] == ["$.name"]
    assert_nothing_kept(uploads_dir)
    response = upload(client, body, "model.arpa", name="home-trigram", display_name="Home 3-gram")
    assert response.status_code == 202, response.content
    answer = response.json()
    assert (answer["name"], answer["display_name"]) == ("home-trigram", "Home 3-gram")
    assert (answer["kind"], answer["status"]) == ("ngram", "checking")
    model = LanguageModel.objects.get()
    assert model.name == "home-trigram" and model.registered_by == alice
    assert (uploads_dir / model.upload_key).read_bytes() == body


def test_the_register_page_takes_a_model_file(alice, alice_client, tiny_gpt2) -> None:
    page = alice_client.get("/models/register/").content.decode()
    assert 'enctype="multipart/form-data"' in page and 'name="file"' in page
    sent = _named(tar_of(files_of(tiny_gpt2), gz=False), "home-made.tar")
    response = alice_client.post_form("/models/register/", {"file": sent, "hidden": "on"})
    assert response.status_code == 302, response.content.decode()
    model = LanguageModel.objects.get(name="home-made")
    assert (model.status, model.is_hidden, model.registered_by) == ("checking", True, alice)
    shown = alice_client.get(response["Location"]).content.decode()
    # It says it is being checked, and updates itself (progress.js polls the model's API).
    assert 'data-api="/api/models/home-made/"' in shown and 'data-finished="0"' in shown
    assert "Checking" in shown and "js/progress.js" in shown
    assert "Queue this model on suites" not in shown


def test_a_page_upload_refused_says_why_beside_the_file(
    alice_client, tmp_path, uploads_dir
) -> None:
    sent = _named(zip_of({"config.json": b"{}", "pytorch_model.bin": b"x"}), "m.zip")
    response = alice_client.post_form("/models/register/", {"file": sent})
    assert response.status_code == 400
    assert "pytorch_model.bin" in response.content.decode()
    assert "safe_serialization=True" in response.content.decode()
    assert_nothing_kept(uploads_dir)


def test_a_source_or_a_file_but_one_of_them(alice_client, uploads_dir) -> None:
    response = alice_client.post_form("/models/register/", {"name": "x"})
    assert (
        response.status_code == 400
        and "give a source, or upload a model file" in response.content.decode()
    )
    sent = _named(TINY_ARPA.encode(), "a.arpa")
    response = alice_client.post_form("/models/register/", {"file": sent, "source": "gpt2"})
    assert response.status_code == 400 and "not both" in response.content.decode()
    assert_nothing_kept(uploads_dir)


def test_the_same_file_twice_and_a_taken_name(alice, uploads_dir) -> None:
    client = token_client(alice)
    body = TINY_ARPA.encode()
    assert raw_upload(client, body, "filename=a.arpa", "text/plain").status_code == 202
    again = raw_upload(client, body, "filename=b.arpa", "text/plain")
    assert again.status_code == 400
    assert "uploaded already, as the model 'a'" in again.json()["errors"][0]["message"]
    taken = raw_upload(client, gzip.compress(body), "filename=a.arpa.gz", "text/plain")
    assert taken.status_code == 400 and taken.json()["errors"][0]["path"] == "$.name"
    assert LanguageModel.objects.count() == 1
    assert len(list(uploads_dir.iterdir())) == 1


def test_json_registration_is_unchanged_and_ready(alice) -> None:
    response = token_client(alice).post(
        "/api/models/", {"source": "EleutherAI/pythia-14m"}, content_type="application/json"
    )
    assert response.status_code == 201
    assert (response.json()["status"], response.json()["reason"]) == ("ready", "")


def test_the_register_route_refuses_the_uploads_folder_as_a_source(
    alice, tiny_gpt2, uploads_dir
) -> None:
    """Someone else's hidden upload, or one refused by its check, cannot be registered
    again by its path: uploads are registered by their upload only."""
    planted = shutil.copytree(tiny_gpt2, uploads_dir / ("0" * 64))
    response = token_client(alice).post(
        "/api/models/", {"source": str(planted), "name": "again"}, content_type="application/json"
    )
    assert response.status_code == 400
    assert "holds the site's uploaded models" in response.json()["errors"][0]["message"]
    assert LanguageModel.objects.count() == 0


# -- runs wait for the check -----------------------------------------------------------


def test_no_run_before_the_check_passes_and_the_verdicts(alice, alice_client, tiny_gpt2) -> None:
    from evaluations.language_models import checks
    from suites.syntaxgym import services as suite_services
    from tests.conftest import small_suite

    suite_services.suite_import(source=small_suite("agree"), owner=alice)
    client = token_client(alice)
    assert upload(client, tar_of(files_of(tiny_gpt2)), "m.tar.gz").status_code == 202
    model = LanguageModel.objects.get(name="m")

    def ask() -> tuple[int, str]:
        response = client.post(
            "/api/evaluations/",
            json.dumps({"model": "m", "suites": ["agree"]}),
            content_type="application/json",
        )
        return response.status_code, response.content.decode()

    status, body = ask()
    assert status == 400 and "still being checked" in body
    # The request page lists it, disabled, saying why.
    form = alice_client.get("/evaluations/new/").content.decode()
    assert "(being checked, cannot run yet)" in form
    assert checks.model_check_record(
        model_id=model.pk, reason="The model cannot run: /srv/x broke", info={}
    )
    # Once: a second verdict (a re-delivered check) changes nothing.
    assert not checks.model_check_record(model_id=model.pk, reason="", info={})
    status, body = ask()
    assert status == 400 and "refused by its check" in body and "/srv/x" not in body
    page = alice_client.get("/models/m/").content.decode()
    assert "Why it was refused" in page and "&lt;path on the server&gt; broke" in page
    LanguageModel.objects.filter(pk=model.pk).update(status="checking")
    assert checks.model_check_record(model_id=model.pk, reason="", info={"n_params": 1234})
    assert ask()[0] == 201
    assert LanguageModel.objects.get(pk=model.pk).parameter_count == 1234


def test_the_sweep_sends_a_check_the_queue_never_got(alice, tiny_gpt2, _private_broker) -> None:
    from evaluations.language_models import checks

    # The upload's commit never comes inside the test's transaction: the check is unsent,
    # as when the task queue was down.
    assert upload(token_client(alice), tar_of(files_of(tiny_gpt2)), "m.tar.gz").status_code == 202
    assert LanguageModel.objects.get().check_sent_at is None
    waiting = _private_broker("gpu")
    assert checks.model_checks_sweep() == 1
    assert _private_broker("gpu") == waiting + 1
    assert checks.model_checks_sweep() == 0  # sent now, and not lost yet


# -- hostile uploads: each a located 4xx, nothing kept ----------------------------------------


def _config(**fields: object) -> bytes:
    return json.dumps(
        {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], **fields}
    ).encode()


def _with(model: Path, changes: dict[str, bytes | None]) -> dict[str, bytes]:
    """The model's files with some replaced, added or (None) left out."""
    files = files_of(model)
    for name, data in changes.items():
        if data is None:
            files.pop(name, None)
        else:
            files[name] = data
    return files


def _tar_with(member: tarfile.TarInfo, model: Path) -> bytes:
    """The model as a tar.gz, with `member` (no data) added first."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w:gz") as tar:
        tar.addfile(member)
        for name, data in files_of(model).items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return out.getvalue()


def _link(kind: bytes, target: str = "/etc/passwd") -> Callable[[Path], bytes]:
    def build(model: Path) -> bytes:
        info = tarfile.TarInfo("tokenizer_extra.json")
        info.type, info.linkname = kind, target
        return _tar_with(info, model)

    return build


def _device(model: Path) -> bytes:
    info = tarfile.TarInfo("null")
    info.type, info.devmajor, info.devminor = tarfile.CHRTYPE, 1, 3
    return _tar_with(info, model)


def _fifo(model: Path) -> bytes:
    info = tarfile.TarInfo("pipe")
    info.type = tarfile.FIFOTYPE
    return _tar_with(info, model)


def _zip_symlink(model: Path) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in files_of(model).items():
            archive.writestr(name, data)
        link = zipfile.ZipInfo("vocab.txt")
        link.create_system = 3
        link.external_attr = 0o120777 << 16
        archive.writestr(link, "/etc/passwd")
    return out.getvalue()


def _named_member(name: str) -> Callable[[Path], bytes]:
    def build(model: Path) -> bytes:
        return tar_of({**files_of(model), name: b"{}"}, top="")

    return build


def _zip_bomb(model: Path) -> bytes:
    # 8 MB of zeros deflate to about 8 KB; the test's limit is 1 MB unpacked.
    return zip_of({**files_of(model), "model.safetensors": bytes(8 * 1024 * KB)})


def _tar_bomb(model: Path) -> bytes:
    return tar_of({**files_of(model), "merges.txt": bytes(256 * KB)})


def _many_members(model: Path) -> bytes:
    return tar_of({**files_of(model), **{f"extra/{i}.txt": b"" for i in range(30)}})


def _truncated_tar_gz(model: Path) -> bytes:
    whole = tar_of(files_of(model))
    return whole[: len(whole) // 2]


def _truncated_zip(model: Path) -> bytes:
    whole = zip_of(files_of(model))
    return whole[: len(whole) - 30]


def _sparse_tar(model: Path) -> bytes:
    """A tar whose weights are a GNU sparse file of 8 MB that packs to a few KB."""
    if shutil.which("tar") is None:
        pytest.skip("GNU tar makes the sparse member")
    folder = model.parent / f"sparse-{model.name}"
    shutil.copytree(model, folder, dirs_exist_ok=True)
    with (folder / "model.safetensors").open("r+b") as weights:
        weights.truncate(8 * 1024 * KB)
    archive = folder.parent / f"{folder.name}.tar"
    subprocess.run(["tar", "--sparse", "-cf", str(archive), "-C", str(folder), "."], check=True)
    return archive.read_bytes()


def _tar_raw_name(raw: bytes) -> Callable[[Path], bytes]:
    """The model as a GNU tar.gz with one more member named by the bytes `raw`."""

    def build(model: Path) -> bytes:
        out = io.BytesIO()
        with tarfile.open(
            fileobj=out, mode="w:gz", format=tarfile.GNU_FORMAT, errors="surrogateescape"
        ) as tar:
            files = {**files_of(model), raw.decode("utf-8", "surrogateescape"): b"{}"}
            for name, data in files.items():
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
        return out.getvalue()

    return build


def _zip_bad_utf8(model: Path) -> bytes:
    """A zip whose member name is flagged UTF-8 (as any non-ASCII name is) but is not."""
    whole = zip_of({**files_of(model), "\u00e9x.txt": b"x"})
    return whole.replace("\u00e9x.txt".encode(), b"\xff\xfex.txt")


def _extended_header(kind: bytes, size: int) -> Callable[[Path], bytes]:
    """The model as a .tar.gz led by an extended header of `kind` that declares `size`
    bytes (sent: a few digits, as a ReDoS of the pax parser would)."""

    def build(model: Path) -> bytes:
        header = tarfile.TarInfo("././@LongLink")
        header.type, header.size = kind, size
        out = io.BytesIO()
        with gzip.GzipFile(fileobj=out, mode="wb") as gz:
            gz.write(header.tobuf(tarfile.GNU_FORMAT) + b"1" * 2048)
        return out.getvalue()

    return build


# (case id) -> (builder of the body, the status, words the message holds, the member named)
HOSTILE: dict[str, tuple[Callable[[Path], bytes], int, str, str | None]] = {
    "pickled weights": (
        lambda m: tar_of(_with(m, {"pytorch_model.bin": b"\x80\x02}q\x00."})),
        400,
        "pickled weights (.bin) are not accepted; convert the weights to safetensors",
        "my-model/pytorch_model.bin",
    ),
    "a checkpoint in a zip": (
        lambda m: zip_of(_with(m, {"ckpt/model.ckpt": b"x"})),
        400,
        "model.save_pretrained(folder, safe_serialization=True)",
        "ckpt/model.ckpt",
    ),
    "python code": (
        lambda m: tar_of(_with(m, {"modeling_mine.py": b"import os\nos.system('id')\n"})),
        400,
        "Python code; models that need code of their own cannot be uploaded",
        "my-model/modeling_mine.py",
    ),
    "auto_map": (
        lambda m: tar_of(_with(m, {"config.json": _config(auto_map={"AutoModel": "x.Y"})})),
        400,
        "config.json asks for custom code (auto_map)",
        "config.json",
    ),
    "trust_remote_code": (
        lambda m: zip_of(_with(m, {"tokenizer_config.json": b'{"trust_remote_code": true}'})),
        400,
        "tokenizer_config.json asks for custom code (trust_remote_code)",
        "tokenizer_config.json",
    ),
    "absolute path": (_named_member("/etc/cron.d/gym"), 400, "an absolute path", "/etc/cron.d/gym"),
    "dot dot": (_named_member("../../escape.json"), 400, "'..' in the name", "../../escape.json"),
    "symbolic link": (
        _link(tarfile.SYMTYPE),
        400,
        "a symbolic link; only plain files",
        "tokenizer_extra.json",
    ),
    "hard link": (
        _link(tarfile.LNKTYPE, "config.json"),
        400,
        "a hard link",
        "tokenizer_extra.json",
    ),
    "link in a zip": (_zip_symlink, 400, "a symbolic link", "vocab.txt"),
    "device": (_device, 400, "a device", "null"),
    "fifo": (_fifo, 400, "a fifo", "pipe"),
    "zip bomb": (_zip_bomb, 413, "GYM_MAX_MODEL_UNPACKED_BYTES", "model.safetensors"),
    "tar bomb": (
        _tar_bomb,
        413,
        "the limit of any one file but the weights (GYM_MAX_MODEL_MEMBER_BYTES)",
        "my-model/merges.txt",
    ),
    "sparse member": (_sparse_tar, 413, "GYM_MAX_MODEL_UNPACKED_BYTES", "./model.safetensors"),
    "too many members": (_many_members, 413, "more than 20 members (GYM_MAX_MODEL_FILES)", None),
    "truncated tar.gz": (_truncated_tar_gz, 400, "damaged or cut short (truncated)", None),
    "truncated zip": (_truncated_zip, 400, "damaged or cut short (truncated)", None),
    "truncated arpa": (
        lambda m: gzip.compress(TINY_ARPA.encode())[:-40],
        400,
        "cut short (truncated)",
        None,
    ),
    "no config": (
        lambda m: tar_of(_with(m, {"config.json": None})),
        400,
        "the archive holds no config.json",
        None,
    ),
    "unknown model type": (
        lambda m: tar_of(_with(m, {"config.json": _config(model_type="gpt-from-mars")})),
        400,
        "model_type 'gpt-from-mars' is not one that transformers knows",
        "config.json",
    ),
    "tokenizer that does not load": (
        lambda m: tar_of(_with(m, {"tokenizer.json": b"{not json"})),
        400,
        "the tokenizer (tokenizer.json, tokenizer_config.json) does not load",
        None,
    ),
    "no safetensors": (
        lambda m: tar_of(_with(m, {"model.safetensors": None})),
        400,
        "no weights as .safetensors",
        None,
    ),
    "a bare pickle": (lambda m: b"\x80\x02}q\x00.", 400, "pickled weights (.pt)", None),
    "a zip of too many members": (
        lambda m: zip_of({**files_of(m), **{f"extra/{i}.txt": b"" for i in range(30)}}),
        413,
        "more than 20 members (GYM_MAX_MODEL_FILES)",
        None,
    ),
    "a GNU long name of 300 MB": (
        _extended_header(tarfile.GNUTYPE_LONGNAME, 300 * 1024 * KB),
        400,
        "an extended (pax or GNU long name) header of 314,572,800 bytes",
        "././@LongLink",
    ),
    "a pax header of 100 KB": (
        _extended_header(tarfile.XHDTYPE, 100 * KB),
        400,
        "an extended (pax or GNU long name) header of 102,400 bytes",
        "././@LongLink",
    ),
    "a tar name not in UTF-8": (
        _tar_raw_name(b"\xff\xfe.txt"),
        400,
        "the name is not valid UTF-8",
        "\\xff\\xfe.txt",
    ),
    "a zip name flagged UTF-8 that is not": (
        _zip_bad_utf8,
        400,
        "the name is not valid UTF-8, though the archive says it is",
        "\\xff\\xfex.txt",
    ),
    "a path longer than the OS allows": (
        _named_member("a/" * 2100 + "f.txt"),
        400,
        "a name longer than 1,024 bytes",
        "a/" * 2100 + "f.txt",
    ),
    "a name part over 255 bytes": (
        _named_member("x" * 300 + ".json"),
        400,
        "a name longer than 255 bytes",
        "x" * 300 + ".json",
    ),
    "not a model": (lambda m: b"hello", 400, "not a model file Gym can take", None),
}


@pytest.fixture
def small_limits(settings) -> None:
    settings.GYM_MAX_MODEL_UNPACKED_BYTES = 1024 * KB
    settings.GYM_MAX_MODEL_MEMBER_BYTES = 128 * KB
    settings.GYM_MAX_MODEL_FILES = 20


@pytest.mark.parametrize("case", sorted(HOSTILE))
@pytest.mark.usefixtures("small_limits")
def test_a_hostile_upload_is_refused_where_it_is_wrong(
    case: str, alice, tiny_gpt2, uploads_dir
) -> None:
    build, status, words, member = HOSTILE[case]
    name = (
        "model.pt"
        if case == "a bare pickle"
        else "model.arpa.gz"
        if "arpa" in case
        else "model.tar.gz"
    )
    response = upload(token_client(alice), build(tiny_gpt2), name)
    assert response.status_code == status, response.content
    (error,) = response.json()["errors"]
    assert error["path"] == "$.file" and words in error["message"], error["message"]
    if member is not None:
        assert error["location"] == {"member": member}
    assert str(uploads_dir) not in error["message"]
    assert_nothing_kept(uploads_dir)


# -- the unpacking alone: what the OS or the readers raise -----------------------------


def _unpack(tmp_path: Path, body: bytes, fmt: str, files: int = 20) -> Path:
    from evaluations.language_models import archives

    path, folder = tmp_path / f"upload.{fmt}", tmp_path / "unpacked"
    path.write_bytes(body)
    folder.mkdir()
    limits = archives.Limits(files=files, unpacked=1024 * KB, member=128 * KB)
    archives.unpack(path, fmt=fmt, folder=folder, limits=limits)
    return folder


def test_a_name_the_os_refuses_is_refused_at_its_member(tmp_path, monkeypatch) -> None:
    from evaluations.language_models import archives

    monkeypatch.setattr(archives, "_NAME_BYTES", 100_000)
    name = "a/" * 2100 + "f.txt"
    with pytest.raises(archives.ArchiveRefused, match="too long to be a file's") as refused:
        _unpack(tmp_path, tar_of({name: b"x"}, top=""), "tar.gz")
    assert refused.value.member == name


def test_a_damaged_member_is_refused_at_it(tmp_path) -> None:
    from evaluations.language_models import archives

    data = bytes(range(256)) * 64
    whole = zip_of({"vocab.txt": data})
    start = whole.index(b"vocab.txt") + len("vocab.txt")  # its deflated bytes follow
    broken = whole[:start] + bytes(64) + whole[start + 64 :]
    with pytest.raises(archives.ArchiveRefused, match="damaged or cut short") as refused:
        _unpack(tmp_path, broken, "zip")
    assert refused.value.member == "vocab.txt"


def _zip_claiming(entries: int, files: dict[str, bytes]) -> bytes:
    """`files` as a zip whose end record says it holds `entries` members."""
    import struct

    whole = bytearray(zip_of(files))
    at = whole.rindex(b"PK\x05\x06")
    struct.pack_into("<2H", whole, at + 8, entries, entries)
    return bytes(whole)


def test_a_zip_of_too_many_members_is_refused_before_it_is_read(tmp_path, monkeypatch) -> None:
    from evaluations.language_models import archives

    body = zip_of({f"extra/{i}.txt": b"" for i in range(30)})

    def unread(*args, **kwargs):
        raise AssertionError("zipfile read the central directory")

    monkeypatch.setattr(archives.zipfile, "ZipFile", unread)
    with pytest.raises(
        archives.ArchiveRefused, match=r"more than 20 members \(GYM_MAX_MODEL_FILES\)"
    ) as refused:
        _unpack(tmp_path, body, "zip")
    assert refused.value.too_large


def test_a_zip_that_hides_its_members_is_refused_before_it_is_read(tmp_path, monkeypatch) -> None:
    from evaluations.language_models import archives

    body = _zip_claiming(1, {f"extra/{i}.txt": b"" for i in range(300)})

    def unread(*args, **kwargs):
        raise AssertionError("zipfile read the central directory")

    monkeypatch.setattr(archives.zipfile, "ZipFile", unread)
    with pytest.raises(archives.ArchiveRefused, match="larger than its 1 members can need"):
        _unpack(tmp_path, body, "zip")


def test_extended_headers_are_held_to_a_total(tmp_path) -> None:
    from evaluations.language_models import archives

    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for i in range(40):  # 40 pax headers of about 4 KB each: each under the bound
            info = tarfile.TarInfo(f"f{i}.txt")
            info.pax_headers = {"comment": "c" * 4000}
            tar.addfile(info, io.BytesIO())
    with pytest.raises(archives.ArchiveRefused, match="extended .* headers in all"):
        _unpack(tmp_path, out.getvalue(), "tar", files=100)


def test_a_fault_of_ours_is_not_taken_for_the_senders(tmp_path, monkeypatch) -> None:
    """A full disk while writing our folder fails loudly (a 500), not as a refusal."""
    import errno

    real_open = Path.open

    def full(self: Path, mode: str = "r", *args, **kwargs):
        if mode == "xb":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real_open(self, mode, *args, **kwargs)

    monkeypatch.setattr(Path, "open", full)
    with pytest.raises(OSError) as raised:
        _unpack(tmp_path, tar_of({"config.json": b"{}"}), "tar.gz")
    assert raised.value.errno == errno.ENOSPC


def test_the_upload_limit_is_its_own(alice, settings, uploads_dir) -> None:
    settings.GYM_MAX_MODEL_UPLOAD_BYTES = 100
    body = TINY_ARPA.encode()
    response = raw_upload(token_client(alice), body, "filename=t.arpa", "text/plain")
    assert response.status_code == 413
    assert "GYM_MAX_MODEL_UPLOAD_BYTES" in response.json()["errors"][0]["message"]
    assert_nothing_kept(uploads_dir)
    # A body over it that says so is refused before it is read, multipart or raw.
    response = upload(token_client(alice), body, "t.arpa")
    assert response.status_code == 413
    assert_nothing_kept(uploads_dir)


def test_strangers_may_not_upload(anon_client, uploads_dir) -> None:
    response = anon_client.post(
        "/api/models/?filename=a.arpa", TINY_ARPA, content_type="text/plain"
    )
    assert response.status_code == 401
    assert_nothing_kept(uploads_dir)


def test_a_stream_is_held_to_the_limit_as_it_is_read(alice, settings, uploads_dir) -> None:
    """A body without a declared length (or one that lies) is counted as it is written."""
    from evaluations.language_models import uploads
    from gym.errors import UploadTooLarge

    settings.GYM_MAX_MODEL_UPLOAD_BYTES = 100
    with pytest.raises(UploadTooLarge, match="GYM_MAX_MODEL_UPLOAD_BYTES"):
        uploads.model_upload(stream=io.BytesIO(TINY_ARPA.encode()), filename="t.arpa", user=alice)
    assert_nothing_kept(uploads_dir)


# -- the check by a real worker, then runs -----------------------------------------------


@pytest.mark.integration
@pytest.mark.django_db(transaction=True)
def test_a_real_worker_checks_uploads_and_they_run(
    redis_broker, workers, alice, alice_client, tiny_gpt2
) -> None:
    from evaluations.models import Evaluation
    from suites.syntaxgym import services as suite_services
    from tests.celery_harness import until, wait_finished
    from tests.conftest import small_suite

    suite_services.suite_import(source=small_suite("agree"), owner=alice)
    client = token_client(alice)
    assert upload(client, tar_of(files_of(tiny_gpt2)), "home-gpt2.tar.gz").status_code == 202
    arpa = gzip.compress(TINY_ARPA.encode())
    assert raw_upload(client, arpa, "filename=tri.arpa.gz").status_code == 202
    # Weights of another shape than its config says: only loading them can tell.
    config = json.loads((tiny_gpt2 / "config.json").read_text())
    wrong = _with(tiny_gpt2, {"config.json": json.dumps({**config, "n_embd": 64}).encode()})
    assert upload(client, zip_of(wrong), "wrong.zip").status_code == 202
    workers()
    until("the checks", lambda: not LanguageModel.objects.filter(status="checking").exists())
    ready = {m.name: m for m in LanguageModel.objects.all()}
    assert (ready["home-gpt2"].status, ready["tri"].status) == ("ready", "ready")
    assert ready["home-gpt2"].parameter_count and ready["home-gpt2"].reason == ""
    refused = ready["wrong"]
    assert refused.status == "refused"
    assert "the weights do not match config.json" in refused.reason
    assert "of another shape" in refused.reason and "transformer." in refused.reason
    answer = client.get("/api/models/wrong/").json()
    assert (answer["status"], answer["reason"]) == ("refused", refused.reason)
    page = alice_client.get("/models/home-gpt2/").content.decode()
    assert "Queue this model on suites" in page and "js/progress.js" not in page
    # Both uploads run on a suite; the refused one may not.
    response = client.post(
        "/api/evaluations/",
        json.dumps({"models": ["home-gpt2", "tri"], "suites": ["agree"]}),
        content_type="application/json",
    )
    assert response.status_code == 201, response.content
    for run in response.json():
        done = wait_finished(Evaluation, run["id"], what=f"the run {run['id']}")
        assert done.status == "done", done.error
        assert done.accuracy is not None
    response = client.post(
        "/api/evaluations/",
        json.dumps({"model": "wrong", "suites": ["agree"]}),
        content_type="application/json",
    )
    assert response.status_code == 400 and "refused by its check" in response.content.decode()
