-- Version 6: a repeat that ran on a busy machine and was run again (`serverlab run
-- --rerun-busy N`) stays stored, marked superseded by the re-run that replaced it in the
-- figures. NULL: the test stands.
ALTER TABLE tests ADD COLUMN superseded_by INTEGER REFERENCES tests(id);
