"""A job submitted to a shared state carries its script's folder: a controller elsewhere runs it from there."""

from __future__ import annotations

import shutil

from spotfit import sdk
from spotfit.controller import shipped_code
from spotfit.controller.loop import Controller
from spotfit.host.home import state_target
from spotfit.state.db import StateDB
from spotfit.stores import open_store

SPEC = "name: shipped\nscript: src/train.py\nmarket: {trace: null}\n"


def _folder(tmp_path):
    folder = tmp_path / "laptop" / "project"
    (folder / "src" / "lib").mkdir(parents=True)
    (folder / "src" / "train.py").write_text("import lib.helper\n")
    (folder / "src" / "lib" / "helper.py").write_text("VALUE = 42\n")
    (folder / "spotfit.yaml").write_text(SPEC)
    return folder


def test_a_controller_without_the_folder_runs_the_shipped_copy(tmp_path, spotfit_home, monkeypatch):
    monkeypatch.setenv("SPOTFIT_STATE_URL", f"sqlite:///{tmp_path / 'team' / 'state.db'}")
    folder = _folder(tmp_path)
    job_id = sdk.submit(str(folder / "spotfit.yaml"))
    shutil.rmtree(tmp_path / "laptop")  # the laptop is gone; the controller runs "elsewhere"

    controller = Controller(StateDB(state_target()), job_id)
    script = controller.spec.script_path
    assert script == (spotfit_home / "code" / job_id / "train.py").resolve()
    assert script.read_text() == "import lib.helper\n"
    assert (script.parent / "lib" / "helper.py").read_text() == "VALUE = 42\n"
    # A second controller (a takeover) finds the copy already there and reads the same.
    again = Controller(StateDB(state_target()), job_id)
    assert again.spec.script_path == script


def test_a_personal_state_ships_nothing_and_the_folder_is_used_as_is(tmp_path):
    folder = _folder(tmp_path)
    job_id = sdk.submit(str(folder / "spotfit.yaml"))
    store = open_store(sdk.status(job_id)["store"])
    assert not store.exists(shipped_code.KEY)
    controller = Controller(sdk.db(), job_id)
    assert controller.spec.script_path == (folder / "src" / "train.py").resolve()
