"""Launch options for a backend's tests, written as flat keys: `launch_options(Aws, key_name="k", data_size_gib=8)`.

A key that names a field of the backend's section (`aws:`, `gcp:`, `kubernetes:`) goes to the section
(validated, as a spec's would be); `data_<x>` to `DataOptions.<x>`; the rest (`runtime_extras`,
`environment`, `has_secrets`, `notebook_token`) to `LaunchOptions` itself. `runtime_pip` and
`runtime_extras` go to both, as `aws_options` puts them.

>>> from spotfit.backends.aws.spec import Aws
>>> opts = launch_options(Aws, key_name="k", data_size_gib=8, runtime_extras=["s3"])
>>> opts.section_as(Aws).key_name, opts.data.size_gib, opts.runtime_extras
('k', 8, ('s3',))
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from spotfit.backends.base import DataOptions, LaunchOptions
from spotfit.spec.base import BackendSection


def launch_options(section: type[BackendSection], **keys: Any) -> LaunchOptions:
    own = {k: keys.pop(k) for k in list(keys) if k in section.model_fields}
    data_fields = {f.name for f in fields(DataOptions)}
    data = {k.removeprefix("data_"): keys.pop(k) for k in list(keys)
            if k.startswith("data_") and k.removeprefix("data_") in data_fields}
    extras = keys.pop("runtime_extras", None) or own.get("runtime_extras")
    return LaunchOptions(section=section.model_validate(own), runtime_pip=own.get("runtime_pip"),
                         runtime_extras=tuple(extras or ()), data=DataOptions(**data), **keys)
