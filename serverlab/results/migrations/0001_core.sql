-- Version 1: suites, runs, tests and the figures every test has.
CREATE TABLE suites (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    path        TEXT NOT NULL,
    sha256      TEXT NOT NULL,
    scale       REAL NOT NULL DEFAULT 1.0,
    created_at  REAL NOT NULL,
    UNIQUE (name, sha256, scale)
);

CREATE TABLE runs (
    id            INTEGER PRIMARY KEY,
    suite_id      INTEGER NOT NULL REFERENCES suites (id),
    started_at    REAL NOT NULL,
    ended_at      REAL,
    status        TEXT NOT NULL
                  CHECK (status IN ('running', 'finished', 'interrupted', 'failed')),
    machine_json  TEXT NOT NULL DEFAULT '{}'
);

CREATE TABLE tests (
    id               INTEGER PRIMARY KEY,
    run_id           INTEGER NOT NULL REFERENCES runs (id),
    permutation_key  TEXT NOT NULL,
    scenario         TEXT NOT NULL DEFAULT '',
    params_json      TEXT NOT NULL DEFAULT '{}',
    contestant       TEXT NOT NULL,
    tunables_json    TEXT NOT NULL DEFAULT '{}',
    repeat_index     INTEGER NOT NULL,
    status           TEXT NOT NULL CHECK (status IN ('ok', 'crashed', 'invalid', 'abandoned')),
    crash_time       REAL,
    exit_code        INTEGER,
    signal           INTEGER,
    oom              INTEGER NOT NULL DEFAULT 0,
    validity_json    TEXT NOT NULL DEFAULT '{}',
    summary_json     TEXT,
    started_at       REAL NOT NULL,
    ended_at         REAL NOT NULL
);
CREATE INDEX tests_by_run ON tests (run_id, permutation_key, repeat_index);

CREATE TABLE engine_intervals (
    test_id    INTEGER NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
    seq        INTEGER NOT NULL,
    t          REAL NOT NULL,
    data_json  TEXT NOT NULL,
    PRIMARY KEY (test_id, seq)
);

CREATE TABLE monitor_samples (
    test_id                INTEGER NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
    t                      REAL NOT NULL,
    cpu_percent            REAL,
    rss_bytes              INTEGER,
    threads                INTEGER,
    fds                    INTEGER,
    ctx_switches           INTEGER,
    processes              INTEGER,
    system_cpu_percent     REAL,
    system_mem_used_bytes  INTEGER,
    engine_cpu_percent     REAL
);
CREATE INDEX monitor_samples_by_test ON monitor_samples (test_id, t);

CREATE TABLE histograms (
    test_id   INTEGER NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
    name      TEXT NOT NULL,
    encoding  TEXT NOT NULL DEFAULT 'hdrhistogram-v2-deflate-base64',
    data      TEXT NOT NULL,
    PRIMARY KEY (test_id, name)
);
