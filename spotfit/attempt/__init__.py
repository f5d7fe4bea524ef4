"""What the controller and an attempt's runtime agree on; no TensorFlow here.

The controller (spotfit/controller/, the backends) and the runtime (spotfit/runtime/, the only
TensorFlow importer) import this package and never each other. They talk through the job's
store prefix and the runtime's exit code:

- `exit_codes`: what the runtime's exit code means;
- `config`: `RuntimeConfig`, what the controller tells an attempt (`attempts/<n>/runtime.json`);
- `layout`: every key of the job's store prefix, each built by one function or constant;
- `progress`: `progress.json` (`Progress`) and its `Phase`;
- `events`: the runtime's event documents (`EventDoc`), one per `events/` object;
- `result`: `result.json` (`Result`) and an attempt's `exit.json` (`ExitRecord`);
- `notebook`: a notebook attempt's token variable and local folders;
- `registry`: the model registry's layout (version claims, model cards): the export writes it, a sweep's publish copies.
"""
