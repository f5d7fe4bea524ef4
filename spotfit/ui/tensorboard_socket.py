"""The dashboard's TensorBoard: a job's logs served on a Unix socket, reached only through the dashboard.

`python -m spotfit.ui.tensorboard_socket STORE_URL JOB_ID CACHE SOCKET PATH_PREFIX` serves the
job's TensorBoard logs (fetched from a remote store as `spotfit tensorboard` does) at
`PATH_PREFIX` on the Unix socket `SOCKET`, which the dashboard creates in a folder of mode 0700:
no TCP port is opened, so no other local user (root aside) can reach TensorBoard, which has no
authentication of its own; the dashboard's proxy (`tensorboard_proxy.py`), behind its token, is
the one way in. It runs in a process of its own (it imports tensorboard, which may import
TensorFlow), prints `{"socket": ...}` once the socket listens, ends on SIGTERM, and reports a
failure as one `error: ...` line on stderr (exit 2).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import threading
from pathlib import Path

from tensorboard import program
from werkzeug import serving

from spotfit.attempt.tensorboard_server import follow, logdir_for, require_tensorboard
from spotfit.errors import SpotfitError


class UnixSocketServer(serving.ThreadedWSGIServer, program.TensorBoardServer):
    """TensorBoard's WSGI app served by werkzeug on a Unix socket (TensorBoard's own server knows TCP alone)."""

    daemon_threads = True

    def __init__(self, wsgi_app, flags, sock: str):
        self._prefix = flags.path_prefix
        super().__init__(f"unix://{sock}", 0, wsgi_app)

    def get_url(self) -> str:
        return f"unix:{self.server_address}{self._prefix}/"


def main(argv: list[str]) -> int:
    store_url, job_id, cache, sock, prefix = argv
    os.umask(0o077)  # the socket and any cached log: this user's alone
    require_tensorboard()
    logdir = logdir_for(store_url, job_id, Path(cache))
    board = program.TensorBoard(server_class=functools.partial(UnixSocketServer, sock=sock))
    board.configure(argv=[None, "--logdir", str(logdir), "--path_prefix", prefix, "--load_fast", "false",
                          "--reload_interval", "5"])
    board.launch()  # serves in a daemon thread named "TensorBoard"
    print(json.dumps({"socket": sock}), flush=True)
    try:
        follow(store_url, logdir, lambda: any(t.name == "TensorBoard" for t in threading.enumerate()))
    finally:
        if os.path.exists(sock):
            os.unlink(sock)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except SpotfitError as err:  # one line for the dashboard to show
        print(f"error: {err.message}", file=sys.stderr)
        sys.exit(2)
