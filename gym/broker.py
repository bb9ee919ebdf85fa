"""The embedded broker: kombu's filesystem transport, made safe for messages of any size
and for several consumers.

kombu's own transport creates a message file and then writes it, so a consumer polling
the folder can take a file that is still empty or half written (a 16 MB suite's work
failed with JSONDecodeError); and it claims a message by moving it to the system's temp
folder, which is a copy, not an atomic rename, when that folder is on another disk.
Here a message is written under a name no consumer reads, flushed, and renamed into
place; a consumer claims it by renaming it inside the same folder, which exactly one
consumer can win."""

from __future__ import annotations

import os
import uuid
from queue import Empty
from time import monotonic

from kombu.transport import filesystem
from kombu.utils.encoding import bytes_to_str, str_to_bytes
from kombu.utils.json import dumps, loads

# Claimed messages wait here, inside the queue folder (same disk: renames are atomic).
CLAIMED = ".claimed"


class Channel(filesystem.Channel):
    def _put(self, queue: str, payload: dict, **kwargs: object) -> None:
        """Write the message where no consumer looks, then rename it into the queue."""
        # Zero-padded, so that the names sort in the order they were sent.
        name = f"{int(monotonic() * 1000):015d}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.partial")
        try:
            with open(partial, "wb") as out:
                out.write(str_to_bytes(dumps(payload)))
                out.flush()
                os.fsync(out.fileno())
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc

    def _get(self, queue: str) -> dict:
        """Take the oldest message of `queue`: rename it out of the queue (only one
        consumer's rename succeeds), read it, delete it."""
        wanted = f"{queue}.msg"
        claimed = os.path.join(self.data_folder_in, CLAIMED)
        os.makedirs(claimed, exist_ok=True)
        for name in sorted(os.listdir(self.data_folder_in)):
            if name.startswith(".") or name.partition(".")[2] != wanted:
                continue
            taken = os.path.join(claimed, f"{uuid.uuid4().hex}-{name}")
            try:
                os.rename(os.path.join(self.data_folder_in, name), taken)
            except FileNotFoundError:
                continue  # another consumer took it first
            try:
                with open(taken, "rb") as message:
                    payload = message.read()
                if self.store_processed:
                    os.replace(taken, os.path.join(self.processed_folder, name))
                else:
                    os.remove(taken)
            except OSError as exc:
                raise filesystem.ChannelError(f"Cannot read file {taken!r} from queue.") from exc
            return loads(bytes_to_str(payload))
        raise Empty()

    def _size(self, queue: str) -> int:
        wanted = f"{queue}.msg"
        return sum(
            1
            for name in os.listdir(self.data_folder_in)
            if not name.startswith(".") and name.partition(".")[2] == wanted
        )


class Transport(filesystem.Transport):
    Channel = Channel
