"""`make bench`: run every benchmark; each rewrites its own section of docs/benchmarks.md."""

import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent

for bench in sorted(HERE.glob("bench_*.py")):
    print(f"== {bench.name}", flush=True)
    subprocess.run([sys.executable, str(bench)], check=True, cwd=HERE)
