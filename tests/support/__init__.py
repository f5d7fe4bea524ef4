"""Helpers the tests share, imported by module path (`from tests.support.wait import wait_for`).

- `wait`: `wait_for(predicate, timeout_s, what)`, the one way a test waits for something;
- `jobs`: `spotfit_cmd`, `write_spec`, `run_inline_job`, the digits example;
- `ledger`: the cost of a launch (and the outages of a zone) read straight from the trace CSV;
- `traces`: tiny hand-made traces for the market tests;
- `seaweed`: a real S3 server (SeaweedFS) on 127.0.0.1;
- `aws_moto`: moto in-process, and what moto does not model.

Fixtures built on them live in the `conftest.py` files.
"""
