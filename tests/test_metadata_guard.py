"""The suite never sends a packet to a cloud metadata address (issue 31, DESIGN.md's network rule)."""

from __future__ import annotations

import os
import socket

import pytest


def test_the_suite_disables_botocore_s_metadata_lookup():
    assert os.environ["AWS_EC2_METADATA_DISABLED"] == "true"


@pytest.mark.parametrize("address", [("169.254.169.254", 80), ("metadata.google.internal", 80)])
def test_a_connection_to_a_metadata_address_is_refused_and_fails_the_test(address, no_metadata_connections):
    with pytest.raises(ConnectionRefusedError, match="metadata address"):
        socket.create_connection(address, timeout=1)
    assert no_metadata_connections == [address[0]]
    no_metadata_connections.clear()  # seen: this test passes; any other test would fail here


def test_botocore_s_credential_chain_is_caught_when_the_variable_is_unset(monkeypatch, tmp_path,
                                                                          no_metadata_connections):
    """Without AWS_EC2_METADATA_DISABLED, botocore asks 169.254.169.254: the guard refuses and records it."""
    import boto3

    for name in [n for n in os.environ if n.startswith("AWS_")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "none"))
    monkeypatch.setenv("AWS_METADATA_SERVICE_NUM_ATTEMPTS", "1")
    assert boto3.Session().get_credentials() is None
    assert "169.254.169.254" in no_metadata_connections
    no_metadata_connections.clear()

    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    assert boto3.Session().get_credentials() is None
    assert no_metadata_connections == []


def test_loopback_connections_still_work():
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.create_connection(server.getsockname(), timeout=5):
            pass
