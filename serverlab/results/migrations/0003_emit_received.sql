-- Version 3: the engine samples places per emit cycle, so the number of deliveries a cycle
-- reached is stored beside each sampled row rather than counted from the rows.
ALTER TABLE emit_records ADD COLUMN received INTEGER;
