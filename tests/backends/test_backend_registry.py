"""Adding a backend is a folder and one registry line: the job spec takes its section, the base loads its class.

The new backend lives in a folder outside the package (written by the test), and the one line is
added to `spotfit.core.registry.BACKENDS` before the spec is imported, in a fresh interpreter.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

SPEC = '''
from pydantic import Field

from spotfit.spec.base import BackendSection


class Fake(BackendSection):
    """The fake cloud's settings."""

    project: str = Field("demo", description="the project to bill")

    def publisher(self, job_id, job_name):
        return f"published {job_id} {job_name} for {self.project}"
'''

BACKEND = '''
from spotfit.backends.base import BackendTraits


class FakeBackend(BackendTraits):
    runs_here = False
'''

PROBE = '''
import json, sys
from spotfit.core import registry
registry.BACKENDS["fake"] = registry.Entry("fakecloud.backend:FakeBackend", section="fakecloud.spec:Fake")

from fakecloud.spec import Fake
from spotfit.backends.base import backend_class
from spotfit.errors import SpecError
from spotfit.spec.job import parse_spec

spec = parse_spec({"name": "j", "script": "t.py", "backend": "fake", "fake": {"project": "p-7"}})
default = parse_spec({"name": "j", "script": "t.py"})
try:
    parse_spec({"name": "j", "script": "t.py", "fake": {"projet": "x"}})
except SpecError as exc:
    unknown = str(exc)
print(json.dumps({
    "backend": spec.backend, "project": Fake.of(spec).project, "default": Fake.of(default).project,
    "sections": sorted(spec.backend_sections()), "publisher": spec.fake.publisher("j-1", "j"),
    "class": backend_class("fake").__name__, "unknown": unknown,
}))
'''


def test_a_backend_added_by_one_registry_line_gets_its_spec_section_and_class(tmp_path):
    package = tmp_path / "fakecloud"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "spec.py").write_text(textwrap.dedent(SPEC))
    (package / "backend.py").write_text(textwrap.dedent(BACKEND))
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.getcwd()])})
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    assert doc["backend"] == "fake" and doc["class"] == "FakeBackend"
    assert (doc["project"], doc["default"]) == ("p-7", "demo")
    assert doc["sections"] == ["aws", "fake", "gcp", "kubernetes"]
    assert doc["publisher"] == "published j-1 j for p-7"
    assert doc["unknown"].startswith("Unknown field `fake.projet` in <spec>: did you mean `project`?")


def test_an_unregistered_backend_is_refused_with_a_did_you_mean():
    from spotfit.errors import SpecError
    from spotfit.spec.job import parse_spec

    try:
        parse_spec({"name": "j", "script": "t.py", "backend": "kubernets"})
    except SpecError as exc:
        assert str(exc) == ("Invalid `backend` in <spec>: received 'kubernets', expected one of 'aws', "
                            "'gcp', 'kubernetes', 'local' (did you mean 'kubernetes'?).")
    else:
        raise AssertionError("an unregistered backend was accepted")
