"""Job labels: free `key: value` pairs (`project`, `owner`, ...) that costs and budgets group by.

A key is lowercase letters, digits and `_`, starting with a letter (at most 32 characters), so
that it is also a valid Prometheus label name and CloudWatch dimension name; a value is 1-63
letters, digits, `-`, `_` or `.`, starting with a letter or a digit (a Kubernetes label value).
A job has at most `MAX_LABELS` of them.

Example:

>>> check({"project": "nlp", "owner": "ada"})
{'project': 'nlp', 'owner': 'ada'}
>>> check({"Project": "nlp"})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
ValueError: expected label keys of lowercase letters, ... ('Project' is not one)
>>> group_of({"project": "nlp"}, "owner")
'(none)'
"""

from __future__ import annotations

import re
from typing import Any

MAX_LABELS = 16
KEY = r"[a-z][a-z0-9_]{0,31}"
VALUE = r"[A-Za-z0-9][A-Za-z0-9_.-]{0,62}"
UNLABELED = "(none)"  # the group of a job without the label asked for


def check(labels: dict[Any, Any]) -> dict[str, str]:
    """`labels` when every key and value is good; else a `ValueError` naming the first bad one."""
    if len(labels) > MAX_LABELS:
        raise ValueError(f"expected at most {MAX_LABELS} labels ({len(labels)} given)")
    for key, value in labels.items():
        if not isinstance(key, str) or not re.fullmatch(KEY, key):
            raise ValueError("expected label keys of lowercase letters, digits and `_`, starting with a letter, "
                             f"at most 32 characters ({key!r} is not one)")
        if not isinstance(value, str) or not re.fullmatch(VALUE, value):
            raise ValueError(f"expected the value of label `{key}` to be text: 1-63 letters, digits, `-`, `_` "
                             "or `.`, starting with a letter or digit (quote numbers)")
    return labels


def group_of(labels: dict[str, str], key: str) -> str:
    """The value of label `key`, or `UNLABELED`."""
    return labels.get(key, UNLABELED)


def matches(labels: dict[str, str], selector: dict[str, str]) -> bool:
    """Whether `labels` has every `key: value` of `selector` (an empty selector matches every job).

    >>> matches({"project": "nlp", "owner": "ada"}, {"project": "nlp"}), matches({}, {"project": "nlp"})
    (True, False)
    """
    return all(labels.get(k) == v for k, v in selector.items())
