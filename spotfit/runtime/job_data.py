"""The runtime's data step: the job's `data.source` synced into the local cache (or mounted) before the script runs.

The cache itself is `stores/datacache.py` (TensorFlow-free, also used on an instance to fill a
data volume); this step reports its progress, phase and event as the runtime does.
"""

from __future__ import annotations

import os
from pathlib import Path

from spotfit.attempt.progress import Phase
from spotfit.stores.datacache import DataCache, SyncStats, size_text


def sync_job_data(config, reporter) -> SyncStats | None:
    """The runtime's data step: sync `config.data_source`, export `SPOTFIT_DATA_DIR`, report.

    `config` is a `RuntimeConfig`; `reporter` a `Reporter` (timing `data_sync_s`, progress
    phase `syncing data`, event `data_synced` with the byte counters). Nothing without a source.
    With `data_mode == "mount"` it mounts the source instead (runtime/datamount.py), and copies
    only when that cannot work.
    """
    if not config.data_source:
        return None
    from spotfit.host.home import DATA_DIR_ENV, default_cache_dir

    root = Path(config.data_cache_dir or default_cache_dir())
    if config.data_mode == "mount":
        from spotfit.runtime.datamount import mount_job_data

        if mount_job_data(config, reporter, root):
            return None
    limit = int(config.data_cache_limit_gib * 2**30) if config.data_cache_limit_gib else None
    cache = DataCache(root, limit_bytes=limit, workers=config.data_workers, verify=config.data_verify)
    reporter.progress(force=True, phase=Phase.SYNCING_DATA)

    def on_progress(done: int, total: int) -> None:
        reporter.progress(data_bytes_done=done, data_bytes_total=total)

    stats = cache.sync(config.data_source, on_progress=on_progress)
    os.environ[DATA_DIR_ENV] = stats.path
    reporter.timing("data_sync_s", stats.seconds)
    reporter.progress(force=True, data_bytes_done=stats.bytes_total, data_bytes_total=stats.bytes_total)
    reporter.event(
        "data_synced",
        f"data {stats.source}: {stats.files} files, {size_text(stats.bytes_total)}; {stats.hits} cache hits, "
        f"{size_text(stats.bytes_downloaded)} downloaded in {stats.seconds:.2f}s",
        **stats.to_dict(),
    )
    return stats
