"""Which dotted names a Keras installation lacks: the check behind keras_internals.py and keras2/internals.py.

It imports only the modules it is asked about, so Keras 2's check does not load Keras 3.

>>> missing([("json", "dumps"), ("json", "no_such_name"), ("no_such_module", "x")])
['json.no_such_name', 'no_such_module.x']
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable


def missing(names: Iterable[tuple[str, str]]) -> list[str]:
    """The dotted names among `names` ((module, attribute path) pairs) that are not there."""
    absent = []
    for module_name, path in names:
        try:
            obj: object = importlib.import_module(module_name)
        except ImportError:
            absent.append(f"{module_name}.{path}")
            continue
        for part in path.split("."):
            if not hasattr(obj, part):
                absent.append(f"{module_name}.{path}")
                break
            obj = getattr(obj, part)
    return absent
