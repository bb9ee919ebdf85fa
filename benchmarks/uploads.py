"""Large corpus uploads against page latency (issue 43): do other pages keep answering
while eight large corpora stream in, and does a gzip of one endless line cost the server
anything?

The server is load.py's, the run command's shape: gunicorn (two processes of four
threads), DEBUG off, a throw-away GYM_VAR_DIR with SQLite and the private broker. Each
process receives GYM_LARGE_UPLOADS_PER_PROCESS corpus uploads at once (default 2), and
answers another 503 `busy` with Retry-After, its body unread. In one run:

1. baseline: one reader fetches a round of pages (home, /suites/, /corpora/, a suite
   page, /models/, the suite list of the API) for --seconds, nothing else running;
2. uploads: the same reader while eight clients each stream a corpus of --gigabytes
   (10^9 bytes) of valid text to POST /api/corpora/ as a raw body with Content-Length,
   generated as it is sent (never held whole); a client answered 503 busy waits as
   Retry-After says (or --retry-after-seconds, shorter, said in the output) and sends
   it again. The reader runs until the last upload has its answer;
3. line bombs: eight gzip uploads at once, each one line of --gigabytes, which must be
   refused with 400 (GYM_MAX_CORPUS_LINE_BYTES) as soon as the line passes the limit.

It prints each upload's status, attempts, seconds and MB/s; the reader's p50/p95/max and
5xx or timeouts (target 0) for 1 and 2; each bomb's answer and time; and the summed
resident memory of the gunicorn processes (sampled from /proc) in each phase. It exits 1
when a page answered 5xx or not at all, an upload ended other than 201, or a bomb was not
refused with 400. The client's pieces go out one at a time, and between pieces the client
looks for an early answer (a 503 comes before the body is read, a bomb's 400 before its
end) and stops sending.

Only 127.0.0.1: the script starts its own server and talks to nothing else.

Usage: .venv/bin/python benchmarks/uploads.py [--gigabytes 2] [--seconds 60]
       [--retry-after-seconds S] [--smoke]
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import random
import select
import sys
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.synchronize import Event
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from benchmarks.load import (  # noqa: E402 - after the path
    HOST,
    example_suite_names,
    latency_lines,
    percentile,
    site_served,
)

UPLOADERS = 8
GB = 10**9
MB = 10**6
PIECE = 1 << 20  # bytes sent at a time; between pieces the client looks for an answer
PAGE_TIMEOUT = 30.0  # a page slower than this counts as a timeout
UPLOAD_TIMEOUT = 900.0  # the longest wait on one send or on the answer of an upload
MAX_ATTEMPTS = 30
NO_ANSWER = 599  # the connection failed before an answer (load.py counts it as a 5xx)

# The corpus text: sentences made of these parts (all written for this benchmark), a few
# hundred distinct ones, one to four to a line.
SUBJECTS = (
    "The old farmer", "A young teacher", "The children next door", "My grandmother",
    "The tired doctor", "A quiet student", "The new neighbours", "Our football coach",
    "The baker on the corner", "A lost tourist", "The museum guard", "My older brother",
    "The village choir", "A patient nurse", "The ship's captain", "Two curious cats",
    "The head gardener", "A retired pilot", "The night porter", "Her best friend",
)  # fmt: skip
ACTIONS = (
    "planted tomatoes", "read a long letter", "painted the fence", "sang an old song",
    "fixed the broken clock", "wrote a short story", "baked fresh bread",
    "carried the heavy boxes", "watched the evening news", "climbed the steep hill",
    "fed the hungry ducks", "answered every question", "cleaned the dusty attic",
    "mended a torn sail", "counted the empty bottles",
)  # fmt: skip
ENDINGS = (
    "before the rain came.", "in the quiet kitchen.", "after a long day at work.",
    "while the radio played.", "near the little harbour.", "on a cold Sunday morning.",
    "without saying a word.", "for the first time in years.", "under the old oak tree.",
    "as the sun went down.", "with great care.", "during the school holidays.",
)  # fmt: skip
DISTINCT_SENTENCES = 300
BLOCKS = 8  # distinct 1 MiB blocks of lines; a corpus cycles through them


def sentences() -> list[str]:
    """DISTINCT_SENTENCES different sentences, the same every run."""
    every = [f"{s} {a} {e}" for s in SUBJECTS for a in ACTIONS for e in ENDINGS]
    return random.Random(43).sample(every, DISTINCT_SENTENCES)


def text_blocks() -> list[bytes]:
    """BLOCKS blocks of about 1 MiB of corpus lines (one to four sentences each), each
    ending with a line end."""
    pool = sentences()
    blocks = []
    for number in range(BLOCKS):
        draw = random.Random(number)
        lines: list[str] = []
        size = 0
        while size < PIECE:
            line = " ".join(draw.choices(pool, k=draw.randint(1, 4)))
            lines.append(line)
            size += len(line) + 1
        blocks.append(("\n".join(lines) + "\n").encode())
    return blocks


def corpus_pieces(index: int, size: int, blocks: list[bytes]) -> Iterator[bytes]:
    """Exactly `size` bytes of plain-text corpus, in pieces: a first line of the uploader's
    own (so that no two corpora are the same text), then the blocks in turn; the last
    piece is cut short and ends with a line end."""
    first = f"Corpus number {index} of the upload benchmark holds {size:,} bytes.\n".encode()
    if size <= len(first):
        raise SystemExit(f"a corpus of {size} bytes is too small for this benchmark")
    yield first
    left = size - len(first)
    turn = index
    while left > 0:
        block = blocks[turn % len(blocks)]
        turn += 1
        if len(block) >= left:
            yield block[: left - 1] + b"\n"
            return
        yield block
        left -= len(block)


def line_bomb(size: int) -> bytes:
    """A gzip of one line of `size` bytes of words, no line end, made a megabyte at a time
    (the line is never held; the gzip is a few megabytes)."""
    compressor = zlib.compressobj(6, zlib.DEFLATED, 31)  # 31: a gzip header and trailer
    words = b"bomb " * (PIECE // 5)
    parts = []
    for start in range(0, size, len(words)):
        parts.append(compressor.compress(words[: size - start]))
    parts.append(compressor.flush())
    return b"".join(parts)


def pieces_of(data: bytes) -> Iterator[bytes]:
    for start in range(0, len(data), PIECE):
        yield data[start : start + PIECE]


# --- uploads -------------------------------------------------------------------------------


@dataclass
class Answer:
    """One attempt: the server's answer (NO_ANSWER when none came), and what was sent."""

    status: int = NO_ANSWER
    code: str = ""
    message: str = ""
    retry_after: float = 0.0
    sent: int = 0
    seconds: float = 0.0


@dataclass
class Upload:
    """One upload through all its attempts: `body` makes its pieces afresh each time."""

    label: str
    path: str
    content_type: str
    size: int
    body: Callable[[], Iterator[bytes]]
    answers: list[Answer] = field(default_factory=list)
    seconds: float = 0.0

    def line(self) -> str:
        last = self.answers[-1]
        busy = sum(1 for a in self.answers if a.code == "busy")
        rate = last.sent / MB / last.seconds if last.seconds else 0.0
        return (
            f"  {self.label:9} {last.status} {last.code:8} attempts {len(self.answers):2} "
            f"(busy {busy:2})  {self.seconds:7.1f} s in all; last attempt "
            f"{size_text(last.sent):>10} sent in {last.seconds:6.2f} s, {rate:6.1f} MB/s"
        )


def size_text(size: int) -> str:
    return f"{size / MB:,.1f} MB" if size >= MB else f"{size / 1000:,.1f} kB"


def answered_early(conn: http.client.HTTPConnection) -> bool:
    """Whether the server has answered (or closed) before the body is all sent."""
    readable, _w, _x = select.select([conn.sock], [], [], 0)
    return bool(readable)


def _send(conn: http.client.HTTPConnection, token: str, job: Upload, answer: Answer) -> None:
    """The request and as much of its body as the server takes before it answers."""
    conn.putrequest("POST", job.path)
    conn.putheader("Authorization", f"Token {token}")
    conn.putheader("Content-Type", job.content_type)
    conn.putheader("Content-Length", str(job.size))
    conn.endheaders()
    try:
        for piece in job.body():
            if answered_early(conn):
                return
            conn.send(piece)
            answer.sent += len(piece)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server stopped reading: its answer says why


def send_once(port: int, token: str, job: Upload) -> Answer:
    """One attempt at `job`: POST its body as a raw body with Content-Length."""
    began = time.monotonic()
    answer = Answer()
    conn = http.client.HTTPConnection(HOST, port, timeout=UPLOAD_TIMEOUT)
    try:
        _send(conn, token, job, answer)
        response = conn.getresponse()
        body = response.read()
        answer.status = response.status
        answer.retry_after = float(response.getheader("Retry-After") or 0)
        if response.status >= 400:
            error = json.loads(body or b"{}").get("errors", [{}])[0]
            answer.code, answer.message = error.get("code", ""), error.get("message", "")
    except (OSError, http.client.HTTPException, ValueError) as exc:
        answer.message = f"no answer: {exc!r}"
    finally:
        conn.close()
    answer.seconds = time.monotonic() - began
    return answer


def run_upload(job: Upload, port: int, token: str, retry_cap: float | None) -> None:
    """Send `job` until it is answered other than 503 busy, waiting between attempts as
    Retry-After says (at most `retry_cap` seconds when given)."""
    began = time.monotonic()
    for _attempt in range(MAX_ATTEMPTS):
        answer = send_once(port, token, job)
        job.answers.append(answer)
        if answer.code != "busy":
            break
        wait = answer.retry_after or 1.0
        time.sleep(wait if retry_cap is None else min(wait, retry_cap))
    job.seconds = time.monotonic() - began


def run_uploads(jobs: list[Upload], port: int, token: str, retry_cap: float | None) -> float:
    """All `jobs` at once, a thread each; the seconds until the last had its answer."""
    began = time.monotonic()
    threads = [
        threading.Thread(target=run_upload, args=(job, port, token, retry_cap), daemon=True)
        for job in jobs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.monotonic() - began


def corpus_jobs(size: int) -> list[Upload]:
    blocks = text_blocks()  # shared by the uploaders, read only

    def body(index: int) -> Callable[[], Iterator[bytes]]:
        return lambda: corpus_pieces(index, size, blocks)

    return [
        Upload(f"upload {i}", f"/api/corpora/?name=upload-{i}", "text/plain", size, body(i))
        for i in range(UPLOADERS)
    ]


def bomb_jobs(size: int) -> list[Upload]:
    bomb = line_bomb(size)
    return [
        Upload(
            f"bomb {i}",
            f"/api/corpora/?name=bomb-{i}&filename=bomb-{i}.txt.gz",
            "application/gzip",
            len(bomb),
            lambda: pieces_of(bomb),
        )
        for i in range(UPLOADERS)
    ]


# --- the page reader -----------------------------------------------------------------------

Sample = tuple[str, int, float]  # kind of page, status, seconds


def page_round(suite: str) -> list[tuple[str, str]]:
    """The pages the reader fetches in turn: (kind, address)."""
    return [
        ("page: home", "/"),
        ("page: /suites/ (redirect)", "/suites/"),
        ("page: corpora", "/corpora/"),
        ("page: suite", f"/suites/{quote(suite)}/"),
        ("page: models", "/models/"),
        ("api: suite list", "/api/suites/"),
    ]


def fetch(port: int, token: str, path: str) -> tuple[int, bool]:
    """GET `path` on a fresh connection: (status, whether it timed out)."""
    headers = {"Authorization": f"Token {token}"} if path.startswith("/api/") else {}
    conn = http.client.HTTPConnection(HOST, port, timeout=PAGE_TIMEOUT)
    try:
        conn.request("GET", path, headers=headers)
        response = conn.getresponse()
        response.read()
        return response.status, False
    except TimeoutError:
        return NO_ANSWER, True
    except (OSError, http.client.HTTPException):
        return NO_ANSWER, False
    finally:
        conn.close()


def read_pages(
    port: int,
    token: str,
    pages: list[tuple[str, str]],
    seconds: float,
    stop: Event,
    out: Connection,
) -> None:
    """The reader (a process of its own): `pages` in turn, one at a time, until `seconds`
    have passed or `stop` is set; sends its samples and its count of timeouts."""
    samples: list[Sample] = []
    timeouts = 0
    until = time.monotonic() + seconds
    turn = 0
    while time.monotonic() < until and not stop.is_set():
        kind, path = pages[turn % len(pages)]
        turn += 1
        start = time.perf_counter()
        status, timed_out = fetch(port, token, path)
        samples.append((kind, status, time.perf_counter() - start))
        timeouts += timed_out
    out.send((samples, timeouts))
    out.close()


@dataclass
class Reading:
    samples: list[Sample]
    timeouts: int
    seconds: float

    @property
    def server_errors(self) -> int:
        return sum(1 for _k, status, _t in self.samples if status >= 500)

    def lines(self, title: str) -> list[str]:
        times = [t for _k, _s, t in self.samples]
        head = (
            f"{title} ({self.seconds:.0f} s): {len(times)} pages, "
            f"p50 {percentile(times, 0.5) * 1000:.0f} ms, "
            f"p95 {percentile(times, 0.95) * 1000:.0f} ms, "
            f"max {max(times, default=0) * 1000:.0f} ms; "
            f"5xx or no answer {self.server_errors}, timeouts ({PAGE_TIMEOUT:.0f} s) "
            f"{self.timeouts}   (target 0)"
        )
        return [head] + latency_lines(self.samples, kind_width=26, errors="5xx")[1:]


class Reader:
    """The page reader in a process of its own (forked), so that the uploaders' threads do
    not hold its clock or its interpreter."""

    def __init__(self, port: int, token: str, pages: list[tuple[str, str]], seconds: float):
        context = multiprocessing.get_context("fork")
        self.stop = context.Event()
        self._answers, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=read_pages, args=(port, token, pages, seconds, self.stop, sender), daemon=True
        )
        self._began = time.monotonic()
        self._process.start()
        sender.close()

    def collect(self) -> Reading:
        """The reader's samples once it has stopped (by its time, or by `stop`)."""
        samples, timeouts = self._answers.recv()
        self._process.join()
        return Reading(samples, timeouts, time.monotonic() - self._began)


# --- the server's memory -------------------------------------------------------------------


def server_rss(master: int) -> int:
    """The resident memory of gunicorn's master and its workers, summed, in bytes."""
    pids = [master]
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            after_name = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        if int(after_name[1]) == master:  # the field after the state: the parent's id
            pids.append(int(stat.parent.name))
    total = 0
    for pid in pids:
        try:
            total += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
        except (OSError, IndexError, ValueError):
            continue
    return total * os.sysconf("SC_PAGE_SIZE")


class MemoryWatch(threading.Thread):
    """Samples `server_rss` every quarter second; the peak of each phase."""

    def __init__(self, master: int) -> None:
        super().__init__(daemon=True)
        self.master = master
        self.phase = "idle"
        self.peaks: dict[str, int] = {}
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.25):
            rss, phase = server_rss(self.master), self.phase
            self.peaks[phase] = max(self.peaks.get(phase, 0), rss)

    def line(self) -> str:
        base = self.peaks.get("baseline", 0)
        parts = [f"idle {self.peaks.get('idle', 0) / 2**20:,.0f} MiB"]
        for phase in ("baseline", "uploads", "bombs"):
            peak = self.peaks.get(phase, 0)
            grown = f" ({(peak - base) / 2**20:+,.0f} MiB)" if phase != "baseline" else ""
            parts.append(f"{phase} peak {peak / 2**20:,.0f} MiB{grown}")
        return "server RSS (gunicorn's processes, summed): " + "; ".join(parts)


# --- the run -------------------------------------------------------------------------------


def problems(readings: list[Reading], corpora: list[Upload], bombs: list[Upload]) -> list[str]:
    found = [
        f"{phase}: {r.server_errors} pages answered 5xx or not at all, {r.timeouts} timed out"
        for phase, r in zip(("baseline", "during the uploads"), readings, strict=True)
        if r.server_errors or r.timeouts
    ]
    found += [
        f"{job.label} ended {job.answers[-1].status} {job.answers[-1].message[:300]}"
        for job in corpora
        if job.answers[-1].status != 201
    ]
    found += [
        f"{job.label} was answered {job.answers[-1].status}, not 400"
        for job in bombs
        if job.answers[-1].status != 400
    ]
    return found


def upload_lines(title: str, jobs: list[Upload], seconds: float) -> list[str]:
    sent = sum(job.answers[-1].sent for job in jobs if job.answers[-1].status < 300)
    lines = [f"{title}: the last answered after {seconds:.1f} s"]
    if sent:
        lines[0] += f"; {sent / MB:,.0f} MB stored, {sent / MB / seconds:.1f} MB/s together"
    lines += [job.line() for job in jobs]
    asked = {a.retry_after for job in jobs for a in job.answers if a.code == "busy"}
    if asked:
        lines.append(f"  Retry-After asked by the server: {', '.join(f'{s:g} s' for s in asked)}")
    return lines


def measure(args: argparse.Namespace, size: int) -> tuple[list[str], list[str]]:
    """The three phases against one site: the report's lines and the problems found."""
    with site_served(1, prefix="gym-uploads-") as site:
        token, port = site.tokens[0], site.port
        pages = page_round(example_suite_names()[0])
        watch = MemoryWatch(site.server_pid)
        watch.start()
        # Unmeasured: each process's first pages load their templates and code.
        for _kind, path in pages * 4:
            fetch(port, token, path)
        watch.phase = "baseline"
        baseline = Reader(port, token, pages, args.seconds).collect()
        watch.phase = "uploads"
        reader = Reader(port, token, pages, float("inf"))
        corpora = corpus_jobs(size)
        uploads_took = run_uploads(corpora, port, token, args.retry_after_seconds)
        reader.stop.set()
        during = reader.collect()
        watch.phase = "bombs"
        bombs = bomb_jobs(size)
        bombs_took = run_uploads(bombs, port, token, args.retry_after_seconds)
        time.sleep(0.5)
        watch.done.set()
    lines = [
        *baseline.lines("pages, baseline (nothing else running)"),
        *during.lines("pages while the corpora stream in"),
        *upload_lines(f"corpus uploads ({size / MB:,.0f} MB each)", corpora, uploads_took),
        *upload_lines(
            f"line bombs (one line of {size / MB:,.0f} MB each, a gzip of {size_text(bombs[0].size)})",
            bombs,
            bombs_took,
        ),
        f"  the first bomb's answer: {bombs[0].answers[-1].message[:200]}",
        watch.line(),
    ]
    return lines, problems([baseline, during], corpora, bombs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gigabytes", type=float, default=2.0, help="each corpus (10^9 B)")
    parser.add_argument("--seconds", type=float, default=60.0, help="the baseline's length")
    parser.add_argument(
        "--retry-after-seconds",
        type=float,
        default=None,
        help="wait at most this long after 503 busy (default: as Retry-After says)",
    )
    parser.add_argument("--smoke", action="store_true", help="5 MB corpora, 5 s baseline (CI)")
    args = parser.parse_args()
    if args.smoke:
        args.gigabytes, args.seconds = 0.005, 5.0
        if args.retry_after_seconds is None:
            args.retry_after_seconds = 1.0
    size = int(args.gigabytes * GB)
    print(
        f"uploads: {UPLOADERS} corpora of {size / MB:,.0f} MB and {UPLOADERS} line bombs "
        f"against the run command's server (gunicorn, 2 processes x 4 threads), "
        f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}"
    )
    if args.retry_after_seconds is not None:
        print(
            f"a client answered 503 busy waits at most {args.retry_after_seconds:g} s "
            "(--retry-after-seconds), not as long as Retry-After asks"
        )
    lines, found = measure(args, size)
    for line in lines:
        print(line)
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    print("problems: " + ("; ".join(found) if found else "none"))
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
