"""Where a trace is: a bundled trace's short name (`aws-v100`), its file name, or a path; no NumPy here,
so that what only names a trace (the ledger's optimum memo, `cost --all`) loads no array code.

>>> resolve_trace("aws-v100").name
'aws_p3.2xlarge_v100_avail_2023-02-15_9zones.csv.gz'
"""

from __future__ import annotations

from pathlib import Path

from spotfit.errors import TraceError
from spotfit.market.data_dir import DATA_DIR

# Bundled traces by short name; the file name is accepted too. A `#` names a dataset of a file.
_COUNTS = "aws_p3.2xlarge_v100_multinode_counts_2023-08.csv.gz"
BUNDLED = {
    "aws-v100": "aws_p3.2xlarge_v100_avail_2023-02-15_9zones.csv.gz",
    "aws-v100-aug-16node": f"{_COUNTS}#availability_16node_2023-08-27",
    "aws-v100-aug-4node": f"{_COUNTS}#preemption_4node_2023-08-03",
}


def resolve_trace(name_or_path: str | Path) -> Path:
    """Path of a trace given a file path or a bundled name (`aws-v100` or its file name).

    `FILE#DATASET` names one dataset of a file that holds several; the path keeps the suffix.
    """
    text = str(name_or_path)
    if text in BUNDLED:
        return DATA_DIR / BUNDLED[text]
    if text in BUNDLED.values() or text.partition("#")[0] in BUNDLED.values():
        return DATA_DIR / text
    path = Path(text).expanduser()
    if path.is_file():
        return path
    file, sep, dataset = text.partition("#")
    if sep and Path(file).expanduser().is_file():
        return Path(f"{Path(file).expanduser()}#{dataset}")
    raise TraceError(
        f"Trace not found: {text!r}: expected a CSV(.gz) file or a bundled trace name "
        f"({', '.join(sorted(BUNDLED))}).",
        hint="Check the path, or use --trace aws-v100 for the bundled AWS V100 trace.",
    )
