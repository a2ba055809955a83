-- Version 8: each test's runtime signals, from the side file the server's runtime wrote
-- ({signals_file}): GC pauses, heap, event-loop delay (serverlab.run.signals). `t` is
-- seconds since the test started, like the monitor's samples; `data_json` keeps the rest
-- of the line (a pause's heap before and after, a delay's mean and p99, the pid).
CREATE TABLE runtime_signals (
    test_id    INTEGER NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
    t          REAL NOT NULL,
    kind       TEXT NOT NULL,
    value      REAL NOT NULL,
    data_json  TEXT NOT NULL DEFAULT '{}'
);
CREATE INDEX runtime_signals_by_test ON runtime_signals (test_id, kind, t);
