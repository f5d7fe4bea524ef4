"""Bulk reads from S3 with boto3: the data cache's download path.

s3fs runs every request on one asyncio loop thread; a cache that downloads with many threads
at once spends that thread's CPU moving bytes. boto3 reads in the calling thread, which made
cache fills faster on small machines (docs/benchmarks.md). It uses the same settings as the
store (`s3_options`: endpoint, profile, region from the environment) and is used only when
boto3 is installed and the store was opened without explicit storage options.
"""

from __future__ import annotations

import threading


class S3RangeReader:
    """`read(path, start, end)` for `bucket/key` paths, over one shared boto3 client."""

    def __init__(self, options: dict):
        self._options = options
        self._client = None
        self._lock = threading.Lock()

    def _get_client(self):
        with self._lock:  # creating a client is not thread-safe; using one is
            if self._client is None:
                import boto3
                import botocore.config

                session = boto3.session.Session(profile_name=self._options.get("profile"))
                self._client = session.client(
                    "s3", endpoint_url=self._options.get("endpoint_url"),
                    region_name=(self._options.get("client_kwargs") or {}).get("region_name"),
                    config=botocore.config.Config(max_pool_connections=64, connect_timeout=5, read_timeout=60,
                                                  retries={"max_attempts": 1, "mode": "standard"}))
            return self._client

    def read(self, path: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        from botocore.exceptions import ClientError

        bucket, _, key = path.partition("/")
        try:
            response = self._get_client().get_object(Bucket=bucket, Key=key, Range=f"bytes={start}-{end - 1}")
        except ClientError as exc:
            code = exc.response.get("Error", {}).get("Code")
            if code in ("NoSuchKey", "404", "NotFound"):
                raise FileNotFoundError(path) from exc
            if code == "InvalidRange":
                return b""
            raise
        return response["Body"].read()


def range_reader(protocol: str, options: dict, explicit: bool) -> S3RangeReader | None:
    """The boto3 reader for an `s3://` store opened with default options, else None."""
    if protocol not in ("s3", "s3a") or explicit:
        return None
    try:
        import boto3  # noqa: F401
    except ImportError:
        return None
    return S3RangeReader(options)
