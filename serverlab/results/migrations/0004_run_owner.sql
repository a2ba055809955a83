-- Version 4: a run records the process that runs it (pid, that pid's start time in clock
-- ticks, and the host), so that a run whose process is gone is marked 'abandoned' instead
-- of staying 'running' forever. SQLite cannot widen a CHECK in place: the table is rebuilt.
CREATE TABLE runs_v4 (
    id            INTEGER PRIMARY KEY,
    suite_id      INTEGER NOT NULL REFERENCES suites (id),
    started_at    REAL NOT NULL,
    ended_at      REAL,
    status        TEXT NOT NULL
                  CHECK (status IN ('running', 'finished', 'interrupted', 'failed', 'abandoned')),
    machine_json  TEXT NOT NULL DEFAULT '{}',
    pid           INTEGER,
    pid_start     INTEGER,
    host          TEXT
);
INSERT INTO runs_v4 (id, suite_id, started_at, ended_at, status, machine_json)
    SELECT id, suite_id, started_at, ended_at, status, machine_json FROM runs;
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
