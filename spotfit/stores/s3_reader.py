"""Bulk reads from S3 with boto3: the data cache's download path.

s3fs runs every request on one asyncio loop thread; a cache that downloads with many threads
at once spends that thread's CPU moving bytes. boto3 reads in the calling thread, which made
cache fills faster on small machines (docs/benchmarks.md). It uses the same settings as the
store (`s3_options`: endpoint, profile, region from the environment) and is used only when
boto3 is installed and the store was opened without explicit storage options.
"""

from __future__ import annotations

import threading
from typing import Any

# (endpoint, profile, region) -> boto3 S3 client (boto3 has no types: Any)
_CLIENTS: dict[tuple[str | None, str | None, str | None], Any] = {}
_CLIENTS_LOCK = threading.Lock()


class S3RangeReader:
    """`read(path, start, end)` for `bucket/key` paths, over one shared boto3 client.

    Clients are shared per (endpoint, profile, region) for the life of the process: creating
    one costs ~50 ms, a tenth of a 256 MiB cache fill here; using one from many threads is safe.
    """

    def __init__(self, options: dict[str, Any]) -> None:
        self._options = options

    def _get_client(self) -> Any:
        region = (self._options.get("client_kwargs") or {}).get("region_name")
        key = (self._options.get("endpoint_url"), self._options.get("profile"), region)
        with _CLIENTS_LOCK:  # creating a client is not thread-safe; using one is
            if key not in _CLIENTS:
                import boto3
                import botocore.config

                session = boto3.session.Session(profile_name=key[1])
                _CLIENTS[key] = session.client(
                    "s3", endpoint_url=key[0], region_name=region,
                    config=botocore.config.Config(max_pool_connections=64, connect_timeout=5, read_timeout=60,
                                                  retries={"max_attempts": 1, "mode": "standard"}))
            return _CLIENTS[key]

    def read(self, path: str, start: int, end: int, etag: str | None = None) -> bytes:
        """Bytes `[start, end)`; with `etag`, only of that version of the object (If-Match)."""
        if end <= start:
            return b""
        from spotfit.stores.aws_errors import error_code

        bucket, _, key = path.partition("/")
        extra = {"IfMatch": etag if etag.startswith('"') else f'"{etag}"'} if etag else {}
        try:
            response = self._get_client().get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}",
                                                     **extra)
        except Exception as exc:
            code = error_code(exc)
            if not code:
                raise
            if code in ("PreconditionFailed", "412"):
                from spotfit.errors import StoreError

                raise StoreError(f"{path} changed while it was downloaded (ETag is no longer {etag}).",
                                 hint="Sync again; the cache fetches the new version.") from exc
            if code in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(path) from exc
            if code == "InvalidRange":
                return b""
            raise
        body: bytes = response["Body"].read()
        return body


def range_reader(protocol: str, options: dict[str, Any], explicit: bool) -> S3RangeReader | None:
    """The boto3 reader for an `s3://` store opened with default options, else None."""
    if protocol not in ("s3", "s3a") or explicit:
        return None
    try:
        import boto3  # noqa: F401
    except ImportError:
        return None
    return S3RangeReader(options)
