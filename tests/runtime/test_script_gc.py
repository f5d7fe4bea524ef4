"""The user's script runs with the runtime's own objects frozen out of the cyclic GC (runtime/main.py)."""

import subprocess
import sys

_RUN = """
import types
from spotfit.runtime.main import _run_script
config = types.SimpleNamespace(workdir={folder!r}, script={script!r}, args=[])
print("code", _run_script(config))
"""

_SCRIPT = """
import gc, weakref

class Node:
    pass

a, b = Node(), Node()
a.other, b.other = b, a  # a cycle only the cyclic GC frees
gone = weakref.ref(a)
del a, b
gc.collect()
print("frozen", gc.get_freeze_count(), "cycle freed", gone() is None)
"""


def test_the_script_runs_with_the_runtimes_objects_frozen_and_its_own_cycles_still_collected(tmp_path):
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT)
    done = subprocess.run([sys.executable, "-c", _RUN.format(folder=str(tmp_path), script=str(script))],
                          capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=120)
    assert done.returncode == 0, done.stderr
    words = done.stdout.split()
    assert words[-2:] == ["code", "0"], done.stdout
    # Everything the runtime imported is frozen (a full collection in the script does not scan it) ...
    assert int(words[words.index("frozen") + 1]) > 10_000, done.stdout
    # ... and a cycle the script makes is still freed.
    assert words[words.index("freed") + 1] == "True", done.stdout
