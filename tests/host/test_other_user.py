"""Another local user reads nothing spotfit wrote and gets no token (issue 31, "Nothing leaks").

As the owner (root, as in CI) the test runs a small Keras job and starts a notebook, both with
a `file://` store outside the home. Then, as uid 65534 (`setpriv --reuid=65534 --regid=65534
--clear-groups`, Debian's stdlib-only /usr/bin/python3), it tries to list every folder and read
every file under the home and the store, and to open the running JupyterLab with every token-like
string it could read. It must fail everywhere; and again after the owner opens the two top
folders (`chmod 755`), since every folder and file below is private on its own.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import tempfile
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from spotfit import sdk
from spotfit.backends.local_process import LocalHandle
from tests.support.jobs import spotfit_cmd, write_spec
from tests.support.wait import wait_for

pytestmark = pytest.mark.slow

NOBODY = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/usr/bin/python3", "-c"]
RULES_SCRIPT = Path(__file__).parents[1] / "controller" / "scripts" / "rules_train.py"
START_S = 240.0

# Run as uid 65534 with the standard library only: {paths, port} on stdin, what it got on stdout.
ATTACK = r'''
import json, os, re, sys, urllib.error, urllib.request
task = json.load(sys.stdin)
readable, texts = [], []
for path in task["paths"]:
    try:
        if os.path.isdir(path):
            os.listdir(path)
        else:
            with open(path, "rb") as fh:
                texts.append(fh.read().decode("utf-8", "replace"))
        readable.append(path)
    except OSError:
        pass
def status(token):
    headers = {"Authorization": "token " + token} if token else {}
    request = urllib.request.Request("http://127.0.0.1:%d/api/kernels" % task["port"], headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code
candidates = sorted({w for t in texts for w in re.findall(r"[A-Za-z0-9_-]{20,}", t)})[:500]
accepted = [c for c in candidates if status(c) == 200]
print(json.dumps({"uid": os.getuid(), "readable": readable, "tried": len(candidates), "accepted": accepted,
                  "no_token": status(None)}))
'''


def _attack(paths: list[str], port: int) -> dict:
    out = subprocess.run([*NOBODY, ATTACK], input=json.dumps({"paths": paths, "port": port}), capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _everything(*roots: Path) -> list[Path]:
    """Every folder and plain file under `roots` (as the owner sees them)."""
    found = []
    for root in roots:
        for folder, _dirs, files in os.walk(root):
            found.append(Path(folder))
            found += [Path(folder, f) for f in files if stat.S_ISREG(os.lstat(Path(folder, f)).st_mode)]
    return found


def _kernels(port: int, token: str) -> int:
    request = urllib.request.Request(f"http://127.0.0.1:{port}/api/kernels",
                                     headers={"Authorization": f"token {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


@pytest.fixture
def open_base(monkeypatch):
    """A folder other users may enter (pytest's own tmp folders are 0700): the home and the store go in it."""
    if os.geteuid() != 0 or shutil.which("setpriv") is None or not Path("/usr/bin/python3").exists():
        pytest.skip("needs root, setpriv (util-linux) and /usr/bin/python3 to act as another uid: NOT TESTED HERE")
    base = Path(tempfile.mkdtemp(prefix="spotfit-other-user-", dir="/tmp"))
    base.chmod(0o755)
    monkeypatch.setenv("SPOTFIT_HOME", str(base / "home"))
    yield base
    for job in sdk.db().list_jobs():
        for attempt in sdk.db().attempts(job["id"]):
            if attempt["handle"]:
                for member in LocalHandle.from_json(attempt["handle"]).processes:
                    member.signal_group(signal.SIGKILL)
    shutil.rmtree(base, ignore_errors=True)


def test_another_uid_reads_nothing_and_gets_no_token(open_base):
    home, store = open_base / "home", open_base / "store"
    env = {**os.environ, "SPOTFIT_HOME": str(home)}
    home.mkdir(mode=0o700)  # as spotfit makes it; the store outside it is opened to specs by `paths.allow`
    (home / "config.yaml").write_text(f"paths: {{allow: ['{store}']}}\n")
    (home / "config.yaml").chmod(0o600)
    job = write_spec(open_base / "job", f"name: private\nscript: rules_train.py\nargs: [--epochs, '2']\n"
                                        f"market: {{trace: null}}\ncheckpoint: {{store: 'file://{store}', "
                                        "interval: {steps: 20}}\n", script=RULES_SCRIPT)
    out = subprocess.run(spotfit_cmd("run", str(job), "--json"), capture_output=True, text=True, timeout=600,
                         stdin=subprocess.DEVNULL, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    assert json.loads(out.stdout)["state"] == "completed"

    notebook = open_base / "nb" / "notebook.yaml"
    notebook.parent.mkdir()
    notebook.write_text(f"name: nb\nkind: notebook\nmarket: {{trace: null}}\ncheckpoint: {{store: 'file://{store}'}}\n"
                        "notebook: {sync_s: 3600}\n")
    out = subprocess.run(spotfit_cmd("notebook", str(notebook), "--backend", "local", "--detach", "--json",
                                     "--wait-s", str(START_S)),
                         capture_output=True, text=True, timeout=START_S + 60, stdin=subprocess.DEVNULL, env=env)
    assert out.returncode == 0, out.stderr[-3000:]
    doc = json.loads(out.stdout)
    port = int(doc["url"].split(":")[2].split("/")[0])
    token_file = Path(doc["token_file"])
    assert _kernels(port, token_file.read_text().strip()) == 200  # the token would open it: the attack is real

    paths = _everything(home, store)
    assert len(paths) > 20 and any(p.name == "state.db-wal" for p in paths) and token_file in paths
    wide = {str(p): oct(stat.S_IMODE(p.stat().st_mode)) for p in paths
            if stat.S_IMODE(p.stat().st_mode) != (0o700 if p.is_dir() else 0o600)}
    assert wide == {}, "every folder spotfit makes is 0700 and every file 0600"

    for opened in (False, True):
        if opened:  # the owner opens the two top folders: what is below stays private on its own
            home.chmod(0o755)
            store.chmod(0o755)
        got = _attack([str(p) for p in paths], port)
        assert got["uid"] == 65534
        readable = got["readable"] if not opened else [p for p in got["readable"] if p not in (str(home), str(store))]
        assert readable == [] and got["accepted"] == [], got
        assert got["no_token"] == 403

    home.chmod(0o700)
    out = subprocess.run(spotfit_cmd("cancel", doc["id"]), capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert sdk.wait(doc["id"], timeout_s=120)["state"] == "cancelled"
    # The controller deletes it once it sees the job ended (just after the state that `wait` returns on).
    wait_for(lambda: not token_file.exists(), 60, "the token file to be deleted when the notebook ends")
