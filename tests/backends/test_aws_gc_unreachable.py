"""`spotfit gc` with an endpoint nobody answers on: one clear line and a failing exit, no traceback."""

from __future__ import annotations

import os
import socket
import subprocess

from tests.support.jobs import spotfit_cmd


def test_gc_reports_an_unreachable_endpoint_in_one_line(tmp_path):
    with socket.socket() as closed:  # bound, never listening: connections are refused at once
        closed.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{closed.getsockname()[1]}"
        env = {**os.environ, "AWS_ENDPOINT_URL": endpoint, "AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y",
               "AWS_MAX_ATTEMPTS": "1", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": os.devnull,
               "AWS_SHARED_CREDENTIALS_FILE": os.devnull}
        out = subprocess.run(spotfit_cmd("gc", "--region", "us-west-2", "--dry-run"), capture_output=True,
                             text=True, env=env, timeout=120, stdin=subprocess.DEVNULL)
    context = f"exit {out.returncode}\nstdout: {out.stdout}\nstderr: {out.stderr}"
    assert out.returncode == 1 and "Traceback" not in out.stderr, context
    lines = out.stderr.splitlines()
    assert len(lines) == 2 and lines[0].startswith("error: Could not clean up EC2 in us-west-2: "), context
    assert "EndpointConnectionError" in lines[0] and endpoint in lines[0], context
    assert lines[1].startswith("hint: "), context
