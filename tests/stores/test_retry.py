"""Retries with backoff, failing fast while a store is down, and recovery when it is back."""

from __future__ import annotations

import importlib
import socket
import sys
import uuid

import numpy as np
import pytest

from spotfit.errors import NotFoundError, StoreError, UsageError
from spotfit.runtime.checkpoint import CheckpointStore
from spotfit.stores import RetryPolicy, open_store
from spotfit.stores.fsspec_store import s3_options
from tests.support.seaweed import BUCKET


def test_retries_transient_errors_then_gives_up_and_fails_fast_while_down():
    policy = RetryPolicy(attempts=3, base_s=0.0, down_s=3600)  # down for the whole test
    calls = []

    def broken():
        calls.append(1)
        raise ConnectionError("refused")

    with pytest.raises(ConnectionError):
        policy.call(broken, permanent=())
    assert len(calls) == 3 and policy.down
    with pytest.raises(ConnectionError):
        policy.call(broken, permanent=())
    assert len(calls) == 5  # two quick attempts while down
    assert policy.call(lambda: "back", permanent=()) == "back" and not policy.down


def test_permanent_errors_are_not_retried():
    policy, calls = RetryPolicy(attempts=5, base_s=0.0), []

    def missing():
        calls.append(1)
        raise FileNotFoundError("x")

    with pytest.raises(FileNotFoundError):
        policy.call(missing, permanent=(FileNotFoundError,))
    assert len(calls) == 1


def test_s3_options_come_from_the_environment():
    env = {"SPOTFIT_S3_ENDPOINT_URL": "http://127.0.0.1:1", "SPOTFIT_S3_PROFILE": "p", "SPOTFIT_S3_REGION": "eu-west-1"}
    options = s3_options(env)
    assert options["endpoint_url"] == "http://127.0.0.1:1" and options["profile"] == "p"
    assert options["client_kwargs"] == {"region_name": "eu-west-1"}
    assert "endpoint_url" not in s3_options({})


def test_missing_optional_package_names_the_extra(monkeypatch):
    # Whether or not gcsfs is installed here: make it unimportable, and forget a loaded class.
    monkeypatch.setitem(sys.modules, "gcsfs", None)
    registry = importlib.import_module("fsspec.registry")._registry
    for protocol in ("gs", "gcs"):
        monkeypatch.delitem(registry, protocol, raising=False)
    with pytest.raises(UsageError, match="needs the package gcsfs") as info:
        open_store("gs://bucket/x")
    assert "spotfit[gcs]" in info.value.hint


def test_unreachable_s3_is_a_store_error_without_secrets(monkeypatch):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("SPOTFIT_S3_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "very-secret-value")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    policy = RetryPolicy(attempts=2, base_s=0.05, down_s=3600)  # down for the whole test
    store = open_store(f"s3://{BUCKET}/x", retry=policy)
    tries = []
    call = policy.call
    monkeypatch.setattr(policy, "call", lambda fn, permanent: call(lambda: tries.append(1) or fn(), permanent))
    with pytest.raises(StoreError) as info:
        store.write_bytes("k", b"1")
    assert "very-secret-value" not in str(info.value) and not isinstance(info.value, NotFoundError)
    assert len(tries) == 2 and policy.down  # every attempt of the budget, then marked down
    with pytest.raises(StoreError):
        store.read_bytes("k")
    assert len(tries) == 2 + policy.down_attempts  # down: only the quick attempts, no backoff


def test_checkpoint_interrupted_by_a_server_outage_is_never_restored(own_seaweed):
    """The server dies between the data and the manifest of a checkpoint, then comes back."""
    store = open_store(f"s3://{BUCKET}/job-{uuid.uuid4().hex[:6]}", retry=RetryPolicy(attempts=3, base_s=0.1))
    ckpts = CheckpointStore(store, keep=2)
    ckpts.save(10, {"w": np.full(8, 10.0)}, {"epoch": 0})
    original = store.write_bytes

    def write_then_die(key, data):
        original(key, data)
        if key.endswith("000000000020/state.npz"):
            own_seaweed.stop()

    store.write_bytes = write_then_die
    with pytest.raises(StoreError):
        ckpts.save(20, {"w": np.full(8, 20.0)}, {"epoch": 1})
    own_seaweed.start()
    store.write_bytes = original
    assert ckpts.steps() == [10]  # the data of step 20 is there, without a manifest
    assert store.exists("checkpoints/000000000020/state.npz")
    assert ckpts.load_latest().step == 10
    ckpts.save(30, {"w": np.full(8, 30.0)}, {"epoch": 2})  # the next interval, server back
    ckpts.save(40, {"w": np.full(8, 40.0)}, {"epoch": 3})
    latest = ckpts.load_latest()
    assert latest.step == 40 and latest.arrays["w"][0] == 40.0
    assert not [k for k in store.list("checkpoints") if "/000000000020/" in k]  # orphan pruned
