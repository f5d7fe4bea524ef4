"""Refuse, in this process, every connection to a cloud metadata address (DESIGN.md's network rule).

`guard()` patches `socket.socket.connect`/`connect_ex` and `socket.getaddrinfo`: a connection
to 169.254.169.254 (AWS, GCP and Azure instance metadata), fd00:ec2::254 (AWS over IPv6) or a
look-up of `metadata.google.internal` raises `ConnectionRefusedError` at once and is recorded,
so that the test that tried fails even when the caller (botocore's credential chain) swallows
the error. Child processes are kept off by the environment instead (`AWS_EC2_METADATA_DISABLED`,
`GCE_METADATA_HOST`), which tests/conftest.py sets for the whole suite.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

METADATA_HOSTS = frozenset({"169.254.169.254", "fd00:ec2::254", "metadata.google.internal",
                            "metadata.google.internal."})


def _host(address) -> str:
    return str(address[0] if isinstance(address, tuple) else address).lower()


@contextmanager
def guard() -> Iterator[list[str]]:
    """Refuse metadata connections until the block ends; yields the list of what was attempted."""
    attempts: list[str] = []
    connect, connect_ex, getaddrinfo = socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo

    def refuse(what: str) -> ConnectionRefusedError:
        attempts.append(what)
        return ConnectionRefusedError(f"a test tried to reach the metadata address {what}: refused (tests/conftest.py)")

    def guarded_connect(sock, address):
        if _host(address) in METADATA_HOSTS:
            raise refuse(_host(address))
        return connect(sock, address)

    def guarded_connect_ex(sock, address):
        if _host(address) in METADATA_HOSTS:
            raise refuse(_host(address))
        return connect_ex(sock, address)

    def guarded_getaddrinfo(host, *args, **kwargs):
        if isinstance(host, (str, bytes)) and (host.decode() if isinstance(host, bytes) else host).lower() \
                in METADATA_HOSTS:
            raise refuse(str(host))
        return getaddrinfo(host, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket.socket, "connect", guarded_connect)
        mp.setattr(socket.socket, "connect_ex", guarded_connect_ex)
        mp.setattr(socket, "getaddrinfo", guarded_getaddrinfo)
        yield attempts
