"""The state DB's schema (`state/db.py`): its tables, one block per version, migrated forward on open.

A state DB records its version (`PRAGMA user_version` on SQLite, the `spotfit_schema` table on
PostgreSQL: `state/dialect.py`); opening it runs the blocks of the versions after its own, and a
state DB of a newer version than `SCHEMA_VERSION` is refused in one line.

>>> sorted(MIGRATIONS) == list(range(1, SCHEMA_VERSION + 1))
True
"""

SCHEMA_VERSION = 4

_SCHEMA_V1 = """
CREATE TABLE jobs (
    id TEXT PRIMARY KEY,
    name TEXT NOT NULL,
    spec_json TEXT NOT NULL,
    store_url TEXT NOT NULL,
    state TEXT NOT NULL DEFAULT 'pending',
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    controller_pid INTEGER,
    controller_seen_at REAL,
    cancel_requested INTEGER NOT NULL DEFAULT 0,
    step INTEGER NOT NULL DEFAULT 0,
    total_steps INTEGER,
    loss REAL,
    clock_origin REAL,
    trace_origin_s REAL,
    trace_now_s REAL NOT NULL DEFAULT 0,
    message TEXT,
    result_json TEXT
);
CREATE TABLE attempts (
    job_id TEXT NOT NULL REFERENCES jobs(id),
    number INTEGER NOT NULL,
    backend TEXT NOT NULL,
    zone TEXT,
    market TEXT NOT NULL,
    state TEXT NOT NULL,
    handle TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    trace_start_s REAL,
    trace_end_s REAL,
    start_step INTEGER,
    end_step INTEGER,
    exit_code INTEGER,
    billed_s REAL,
    cost_usd REAL,
    info_json TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (job_id, number)
);
CREATE TABLE events (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id TEXT NOT NULL REFERENCES jobs(id),
    attempt INTEGER,
    ts REAL NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    data_json TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX events_job ON events(job_id, id);
"""

# Version 2: the lease (who drives the job, until when) and the long-running controllers.
_SCHEMA_V2 = """
ALTER TABLE jobs ADD COLUMN lease_owner TEXT;
ALTER TABLE jobs ADD COLUMN lease_expires_at REAL;
CREATE TABLE controllers (
    id TEXT PRIMARY KEY,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    started_at REAL NOT NULL,
    seen_at REAL NOT NULL,
    jobs INTEGER NOT NULL DEFAULT 0
)
"""

# Version 3: an ended job's cost document, kept once computed (`controller/cost_doc.py`): it never
# changes again, and `cost --all` over thousands of jobs would otherwise solve each one's optimum.
_SCHEMA_V3 = """
CREATE TABLE job_costs (
    job_id TEXT PRIMARY KEY REFERENCES jobs(id),
    version TEXT NOT NULL,
    doc_json TEXT NOT NULL
)
"""

# Version 4: optima already solved, by the digest of their window (`controller/hindsight.py`, `OptimumMemo`): a
# running job's optimum changes only when an attempt's bill enters its ledger, and `cost --all` reads many. And
# beside an ended job's kept document, what `cost --all` sums of it (`controller/spend.py`, `entry_of`).
_SCHEMA_V4 = """
CREATE TABLE optimum_memo (
    key TEXT PRIMARY KEY,
    doc_json TEXT NOT NULL
);
ALTER TABLE job_costs ADD COLUMN entry_json TEXT
"""

MIGRATIONS = {1: _SCHEMA_V1, 2: _SCHEMA_V2, 3: _SCHEMA_V3, 4: _SCHEMA_V4}
