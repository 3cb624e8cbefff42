"""The results store's SQLite schema (version 4). docs/bench.md, docs/compare.md and docs/tune.md describe
every column.

Version 2 added the comparison tables (``comparisons``, ``comparison_runs``, ``baselines``), version 3
the ``run_claims`` table (which process is running a run), version 4 the tune tables (``tunes``,
``tune_runs``), version 5 the per-turn columns of ``requests`` (``session_index``, ``turn_index``,
``cached_tokens``); an older store is migrated in place when opened (:data:`MIGRATIONS`).
"""

from __future__ import annotations

SCHEMA_VERSION = 5

RUN_STATUSES = ("running", "done", "failed", "interrupted")
POINT_STATUSES = ("pending", "running", "done")

DDL = """
CREATE TABLE IF NOT EXISTS schema_version (
    version     INTEGER NOT NULL
);

CREATE TABLE IF NOT EXISTS runs (
    id                      INTEGER PRIMARY KEY AUTOINCREMENT,
    status                  TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
    started_at              TEXT NOT NULL,          -- ISO-8601 UTC
    finished_at             TEXT,
    tool_version            TEXT NOT NULL,
    host                    TEXT NOT NULL,
    url                     TEXT NOT NULL,
    api                     TEXT NOT NULL,
    model                   TEXT,
    config_json             TEXT NOT NULL,          -- the full BenchConfig, API key removed
    suite_name              TEXT NOT NULL,
    suite_version           INTEGER NOT NULL,
    suite_hash              TEXT NOT NULL,
    server_fingerprint_json TEXT,                   -- /v1/models and whatever else identifies the server
    server_info_json        TEXT,                   -- e.g. SGLang /server_info
    response_headers_json   TEXT,                   -- headers of the server's responses
    error                   TEXT                    -- why a failed run stopped
);

CREATE TABLE IF NOT EXISTS points (
    id                       INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id                   INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    point_index              INTEGER NOT NULL,
    spec_json                TEXT NOT NULL,          -- the load runner's PointSpec
    status                   TEXT NOT NULL CHECK (status IN ('pending', 'running', 'done')),
    started_at               TEXT,
    finished_at              TEXT,
    windows_json             TEXT NOT NULL DEFAULT '[]',  -- [[start_ns, end_ns], ...] one per segment
    aggregates_json          TEXT,                   -- PointAggregate.to_dict()
    server_spec_before_json  TEXT,
    server_spec_after_json   TEXT,
    UNIQUE (run_id, point_index)
);

CREATE TABLE IF NOT EXISTS requests (
    id                     INTEGER PRIMARY KEY AUTOINCREMENT,
    point_id               INTEGER NOT NULL REFERENCES points(id) ON DELETE CASCADE,
    segment                INTEGER NOT NULL,         -- 0 for the first session, +1 per resume
                                                     -- (warm-up requests are never stored)
    request_index          INTEGER NOT NULL,
    prompt_index           INTEGER NOT NULL,
    domain                 TEXT NOT NULL,
    api                    TEXT NOT NULL,
    scheduled_ns           INTEGER,
    t_send_ns              INTEGER,
    t_headers_ns           INTEGER,
    t_end_ns               INTEGER,
    num_chunks             INTEGER NOT NULL,
    chunk_times            BLOB NOT NULL,            -- codec.encode_times(..., base=t_send_ns)
    chunk_tokens           BLOB NOT NULL,            -- codec.encode_counts(...)
    token_count_source     TEXT NOT NULL,
    prompt_tokens          INTEGER,
    output_tokens          INTEGER,
    output_text            TEXT NOT NULL,
    finish_reason          TEXT,
    spec_verify_ct         INTEGER,
    spec_accept_length     REAL,
    spec_accept_rate       REAL,
    spec_correct_drafts    INTEGER,
    spec_proposed_drafts   INTEGER,
    spec_accept_histogram  TEXT,                     -- JSON list or NULL
    status_code            INTEGER,
    error_class            TEXT,
    error_message          TEXT,
    server_request_id      TEXT,
    UNIQUE (point_id, request_index)   -- stored once: resume reruns only the missing indices
);

CREATE INDEX IF NOT EXISTS points_by_run ON points (run_id, point_index);
"""

# Version 2: comparisons of two arms (``specgauge compare``) and named baselines.
DDL_V2 = """
CREATE TABLE IF NOT EXISTS comparisons (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    status          TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    plan_json       TEXT NOT NULL,          -- the ComparePlan (arms, suites, points, seed, rounds)
    result_json     TEXT,                   -- CompareResult.model_dump(mode="json") once done
    error           TEXT
);

CREATE TABLE IF NOT EXISTS comparison_runs (
    comparison_id   INTEGER NOT NULL REFERENCES comparisons(id) ON DELETE CASCADE,
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    arm             TEXT NOT NULL CHECK (arm IN ('baseline', 'speculative', 'verify')),
    stage           TEXT NOT NULL,          -- 'single:<domain>' or 'sweep'
    round           INTEGER NOT NULL,
    PRIMARY KEY (comparison_id, arm, stage, round)
);

CREATE TABLE IF NOT EXISTS baselines (
    name            TEXT PRIMARY KEY,
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    created_at      TEXT NOT NULL
);
"""

# Version 3: the process that is running a run (bench, --resume, compare), so that a second one
# refuses before sending anything. A row left by a killed process is taken over once that process
# is gone (same host: its pid no longer runs with the same start time).
DDL_V3 = """
CREATE TABLE IF NOT EXISTS run_claims (
    run_id          INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    pid             INTEGER NOT NULL,
    host            TEXT NOT NULL,
    process_started TEXT,                   -- the process's start time (Linux /proc/PID/stat), against pid reuse
    claimed_at      TEXT NOT NULL
);
"""

# Version 4: tunes (``specgauge tune``, ids tN): the plan, the result document (choices, schedule,
# settings, verification, measuring time; tune/render.py ``result_document``) and the bench runs it
# made, one per point (a depth or the schedule at one concurrency, context band and round).
DDL_V4 = """
CREATE TABLE IF NOT EXISTS tunes (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    status          TEXT NOT NULL CHECK (status IN ('running', 'done', 'failed', 'interrupted')),
    started_at      TEXT NOT NULL,
    finished_at     TEXT,
    plan_json       TEXT NOT NULL,          -- the TunePlan (arms, depths, levels, rounds, suite, seed)
    result_json     TEXT,                   -- the tune's JSON document once done (docs/tune.md)
    error           TEXT
);

CREATE TABLE IF NOT EXISTS tune_runs (
    tune_id         INTEGER NOT NULL REFERENCES tunes(id) ON DELETE CASCADE,
    run_id          INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    stage           TEXT NOT NULL CHECK (stage IN ('measure', 'verify')),
    arm             TEXT NOT NULL,          -- 'k=3' (a fixed depth) or 'schedule'
    concurrency     INTEGER NOT NULL,
    round           INTEGER NOT NULL,
    PRIMARY KEY (tune_id, run_id)
);
"""

# Version 5: multi-turn sessions (load/sessions.py): a request's session slot and turn within the point
# (NULL for a single request; its request_index is then session_index * 1000 + turn_index), and the
# prompt tokens the server's prefix cache served, where the server reports it.
DDL_V5 = """
ALTER TABLE requests ADD COLUMN session_index INTEGER;
ALTER TABLE requests ADD COLUMN turn_index INTEGER;
ALTER TABLE requests ADD COLUMN cached_tokens INTEGER;
"""

# Applied in order to a store whose version is below the key.
MIGRATIONS = {2: DDL_V2, 3: DDL_V3, 4: DDL_V4, 5: DDL_V5}
