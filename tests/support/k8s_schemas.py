"""kubernetes-validate and jsonschema, imported when a test first validates a manifest.

jsonschema's import compiles an RFC 3987 grammar (about 2.3 s on this 2-core machine), which every
xdist worker paid while collecting when the manifest tests imported it at their top.
"""

from __future__ import annotations

import functools
from types import ModuleType


@functools.cache
def schemas() -> tuple[ModuleType, ModuleType, str]:
    """(jsonschema, kubernetes_validate, the newest Kubernetes version kubernetes-validate ships)."""
    import jsonschema
    import kubernetes_validate

    return jsonschema, kubernetes_validate, kubernetes_validate.utils.latest_version()
