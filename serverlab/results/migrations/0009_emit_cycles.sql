-- Version 9: each emit cycle as the clients measured it (engine output version 3): its
-- deliveries' delays as an HdrHistogram (µs, V2 deflate base64) that adds up over cycles, its
-- first and last arrival (Unix ms, server's clock) and the engine's drain time (the longest a
-- delivery of the cycle waited in the kernel before the engine read it, µs; NULL unstamped).
-- The push figures take their delay percentiles from the window's cycles alone.
CREATE TABLE emit_cycles (
    test_id           INTEGER NOT NULL REFERENCES tests (id) ON DELETE CASCADE,
    event             TEXT NOT NULL,
    seq               INTEGER NOT NULL,
    created_ms        INTEGER NOT NULL,
    received          INTEGER NOT NULL,
    total             INTEGER NOT NULL,
    delay_histogram   TEXT NOT NULL,
    first_arrival_ms  REAL NOT NULL,
    last_arrival_ms   REAL NOT NULL,
    drain_us          INTEGER,
    drain_samples     INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX emit_cycles_by_test ON emit_cycles (test_id, event, seq);
