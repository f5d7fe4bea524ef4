"""A JSON schema of the TFJob (kubeflow.org/v1) envelope, written from the Training Operator's API.

It checks the fields spotfit sets and refuses unknown ones (`additionalProperties: false`), as
the CRD's structural schema prunes them: `spec.runPolicy` (backoffLimit, cleanPodPolicy,
ttlSecondsAfterFinished, activeDeadlineSeconds, suspend, schedulingPolicy), `spec.successPolicy`,
`spec.enableDynamicWorker`, and `spec.tfReplicaSpecs.<Type>` (replicas, restartPolicy,
template). Each replica's `template` is validated separately against the core
`PodTemplateSpec` schema of `kubernetes-validate`, as the CRD embeds that type.
"""

from __future__ import annotations

REPLICA_TYPES = ("Chief", "PS", "Worker", "Evaluator")

TFJOB_SCHEMA = {
    "type": "object",
    "required": ["apiVersion", "kind", "metadata", "spec"],
    "additionalProperties": False,
    "properties": {
        "apiVersion": {"const": "kubeflow.org/v1"},
        "kind": {"const": "TFJob"},
        "metadata": {"type": "object"},
        "spec": {
            "type": "object",
            "required": ["tfReplicaSpecs"],
            "additionalProperties": False,
            "properties": {
                "enableDynamicWorker": {"type": "boolean"},
                "successPolicy": {"type": "string", "enum": ["", "AllWorkers"]},
                "runPolicy": {
                    "type": "object",
                    "additionalProperties": False,
                    "properties": {
                        "activeDeadlineSeconds": {"type": "integer", "minimum": 1},
                        "backoffLimit": {"type": "integer", "minimum": 0},
                        "cleanPodPolicy": {"type": "string", "enum": ["All", "Running", "None"]},
                        "schedulingPolicy": {"type": "object"},
                        "suspend": {"type": "boolean"},
                        "ttlSecondsAfterFinished": {"type": "integer", "minimum": 0},
                    },
                },
                "tfReplicaSpecs": {
                    "type": "object",
                    "minProperties": 1,
                    "propertyNames": {"enum": list(REPLICA_TYPES)},
                    "additionalProperties": {
                        "type": "object",
                        "required": ["template"],
                        "additionalProperties": False,
                        "properties": {
                            "replicas": {"type": "integer", "minimum": 1},
                            "restartPolicy": {"type": "string", "enum": ["Always", "OnFailure", "Never", "ExitCode"]},
                            "template": {"type": "object"},
                        },
                    },
                },
            },
        },
    },
}
