"""How much disk a dataset's cache needs on a cloud worker (pure), shared by aws and kubernetes.

The rule: the data, 20% headroom (the cache's partial downloads and a checkpoint), and 10 GiB
(the environment), rounded up to whole GiB.

>>> data_disk_gib(200 * GIB)
250
>>> data_disk_gib(0)
10
"""

from __future__ import annotations

import math

GIB = 1024**3
HEADROOM = 0.2
EXTRA_GIB = 10


def data_disk_gib(data_bytes: int) -> int:
    """The disk for `data_bytes` of data: data + 20% + 10 GiB, in whole GiB."""
    return math.ceil(data_bytes / GIB * (1 + HEADROOM) + EXTRA_GIB)
