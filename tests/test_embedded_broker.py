"""The embedded broker (gym.broker): a consumer never sees a message before it is
complete, whatever its size, and exactly one of several consumers gets each message."""

from __future__ import annotations

import os
import threading
import time
import uuid
from pathlib import Path

from kombu import Connection

from gym import broker


def _connection(folder: Path) -> Connection:
    return Connection(
        "filesystem://",
        transport_options={
            "data_folder_in": str(folder),
            "data_folder_out": str(folder),
            "control_folder": str(folder / "control"),
            "store_processed": False,
        },
    )


def test_the_filesystem_url_gives_the_atomic_transport(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import gym.celery  # noqa: F401 - registers the transport

    with _connection(tmp_path) as connection:
        assert isinstance(connection.transport, broker.Transport)


def test_a_big_message_is_never_visible_half_written(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A reader polls the folder while a 16 MB message is written: every queue file it
    can see already has its full size."""
    import gym.celery  # noqa: F401

    body = {"sentences": [["x" * 80] * 4] * 50_000}  # about 16 MB of JSON
    # A name of its own: the transport remembers declared exchanges per process.
    queue_name = f"big-{uuid.uuid4().hex[:8]}"
    seen_sizes: list[int] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            for name in os.listdir(tmp_path):
                if name.endswith(f".{queue_name}.msg"):
                    try:
                        seen_sizes.append((tmp_path / name).stat().st_size)
                    except FileNotFoundError:
                        pass

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with _connection(tmp_path) as connection:
            queue = connection.SimpleQueue(queue_name)
            queue.put(body)
            # The complete file is there until it is consumed: let the watcher see it.
            deadline = time.monotonic() + 30
            while not seen_sizes and time.monotonic() < deadline:
                time.sleep(0.01)
            done.set()
            watcher.join()
            message = queue.get(timeout=5)
            assert message.payload == body
            message.ack()
            queue.close()
    finally:
        done.set()
        watcher.join()
    full = max(seen_sizes)
    assert full > 15_000_000
    assert set(seen_sizes) == {full}


def test_each_message_goes_to_exactly_one_of_several_consumers(tmp_path) -> None:  # type: ignore[no-untyped-def]
    import gym.celery  # noqa: F401

    queue_name = f"many-{uuid.uuid4().hex[:8]}"
    with _connection(tmp_path) as producer:
        queue = producer.SimpleQueue(queue_name)
        for n in range(40):
            queue.put({"n": n})
        queue.close()
    got: list[int] = []
    lock = threading.Lock()

    def consume() -> None:
        with _connection(tmp_path) as connection:
            channel = connection.default_channel
            while True:
                try:
                    payload = channel._get(queue_name)
                except Exception:  # noqa: BLE001 - Empty: the queue is drained
                    return
                with lock:
                    got.append(payload["body"])

    consumers = [threading.Thread(target=consume) for _ in range(4)]
    for thread in consumers:
        thread.start()
    for thread in consumers:
        thread.join()
    assert len(got) == len(set(got)) == 40  # none twice, none lost
    assert not [n for n in os.listdir(tmp_path) if n.endswith(".msg")]
