-- Version 2: what the server itself reports (GET /stats) and the seed 004 emit records.
CREATE TABLE server_stats (
    test_id     INTEGER NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
    t           REAL NOT NULL,
    phase       TEXT NOT NULL DEFAULT 'end',
    stats_json  TEXT NOT NULL
);
CREATE INDEX server_stats_by_test ON server_stats (test_id, t);

CREATE TABLE emit_records (
    test_id      INTEGER NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
    event        TEXT NOT NULL,
    seq          INTEGER NOT NULL,
    place        INTEGER NOT NULL,
    total        INTEGER NOT NULL,
    duration_ms  REAL NOT NULL,
    created_ms   INTEGER,
    sent_ms      INTEGER
);
CREATE INDEX emit_records_by_test ON emit_records (test_id, event, seq);
