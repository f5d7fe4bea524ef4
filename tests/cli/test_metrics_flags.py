"""`spotfit controller --metrics-port/--metrics-host`: bad values are one line, before anything starts."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(("args", "fragment"), [
    (["--metrics-port", "0"], "Invalid `--metrics-port`: received 0, expected an integer >= 1 and <= 65535"),
    (["--metrics-port", "70000"], "received 70000"),
    (["--metrics-port", "9464", "--metrics-host", " "], "Invalid `--metrics-host`"),
])
def test_bad_metrics_flags(refused, args, fragment):
    assert fragment in refused("controller", *args)
