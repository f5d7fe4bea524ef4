"""A job's secrets on AWS: SSM Parameter Store SecureStrings that only the instance role reads.

`spotfit run` reads each name of the spec's `secrets:` from the submitting shell and `put`s
it as `/spotfit/<job id>/<NAME>` (a `SecureString`, encrypted with the account's `aws/ssm`
key, tagged with the job). Nothing else carries the values: not the spec, the state DB, the
store, user-data or an event. The job's `secrets.json` in its store names the parameter path,
region and names (no value); the instance agent reads the values with the instance role
(`agent_env`) and passes them to the script's environment only. The controller never reads
them back: when the job ends it lists the names (`DescribeParameters`) and deletes them.

Example:

>>> parameter_path("digits-20260101-120000-ab12")
'/spotfit/digits-20260101-120000-ab12/'
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from spotfit.attempt import layout
from spotfit.errors import NotFoundError

if TYPE_CHECKING:
    from spotfit.backends.aws.client import SsmClient
    from spotfit.stores.base import ObjectStore

TAG_JOB = "spotfit:job"


def parameter_path(job_id: str) -> str:
    return f"/spotfit/{job_id}/"


def put(ssm: SsmClient, job_id: str, values: dict[str, str]) -> list[str]:
    """Store each value as a SecureString under the job's path; returns the parameter names."""
    names: list[str] = []
    for name, value in sorted(values.items()):
        full = parameter_path(job_id) + name
        ssm.put_parameter(Name=full, Value=value, Type="SecureString", Description=f"spotfit secret of job {job_id}",
                          Tags=[{"Key": TAG_JOB, "Value": job_id}, {"Key": "spotfit:managed", "Value": "true"}])
        names.append(full)
    return names


def names(ssm: SsmClient, job_id: str) -> list[str]:
    """The job's parameter names, listed without reading any value."""
    found: list[str] = []
    for page in ssm.get_paginator("describe_parameters").paginate(
            ParameterFilters=[{"Key": "Path", "Option": "Recursive", "Values": [parameter_path(job_id).rstrip("/")]}]):
        found += [p["Name"] for p in page["Parameters"]]
    return found


def delete(ssm: SsmClient, job_id: str) -> list[str]:
    """Delete the job's parameters; returns the names deleted."""
    found = names(ssm, job_id)
    for i in range(0, len(found), 10):  # DeleteParameters takes at most 10 names
        ssm.delete_parameters(Names=found[i:i + 10])
    return found


POINTER_KEY = layout.SECRETS


def write_pointer(store: ObjectStore, job_id: str, region: str, secret_names: list[str]) -> None:
    """The job's `secrets.json`: where the agents find the values (path, region, names; never a value)."""
    doc = {"path": parameter_path(job_id), "region": region, "names": sorted(secret_names)}
    store.write_bytes(POINTER_KEY, json.dumps(doc).encode())


def agent_env(store: ObjectStore) -> dict[str, str]:
    """On the instance: the attempt's secrets, read from SSM with the instance role ({} without any).

    Uses botocore alone (the runtime's `s3` extra brings it; boto3 need not be installed).
    """
    try:
        doc = json.loads(store.read_bytes(POINTER_KEY))
    except NotFoundError:
        return {}
    import botocore.session

    ssm = botocore.session.get_session().create_client("ssm", region_name=doc["region"])
    values: dict[str, str] = {}
    for page in ssm.get_paginator("get_parameters_by_path").paginate(
            Path=doc["path"].rstrip("/"), Recursive=True, WithDecryption=True):
        for p in page["Parameters"]:
            values[p["Name"].rsplit("/", 1)[-1]] = p["Value"]
    missing = sorted(set(doc["names"]) - set(values))
    if missing:
        raise RuntimeError(f"secrets {', '.join(missing)} are not under {doc['path']} in SSM ({doc['region']}): "
                           "deleted, or the instance role may not read them (docs/aws.md#secrets)")
    return {name: values[name] for name in doc["names"]}
