-- Version 7: every run carries a machine fingerprint (CPU model and count, kernel, memory in
-- GiB, CPU frequency governor) and, beside it, never in it, the versions of serverlab, the
-- engine, each contestant and the tools. A history series never mixes fingerprints, and
-- crosses version changes, showing them.
-- Older runs get what their machine_json already said; their governor is unknown (NULL).
ALTER TABLE runs ADD COLUMN fingerprint_json TEXT NOT NULL DEFAULT '{}';
ALTER TABLE runs ADD COLUMN versions_json TEXT NOT NULL DEFAULT '{}';
UPDATE runs SET fingerprint_json = json_object(
        'cpu_model', json_extract(machine_json, '$.cpu_model'),
        'cpus', json_extract(machine_json, '$.cpus'),
        'kernel', json_extract(machine_json, '$.kernel'),
        'memory_gib', CAST(json_extract(machine_json, '$.memory_bytes') / 1073741824.0 + 0.5
                           AS INTEGER),
        'governor', NULL)
    WHERE json_type(machine_json, '$.cpu_model') IS NOT NULL;
UPDATE runs SET versions_json = json_object(
        'contestants', json(coalesce(json_extract(machine_json, '$.contestant_versions'), '{}')),
        'tools', json(coalesce(json_extract(machine_json, '$.tools'), '{}')))
    WHERE json_type(machine_json, '$.contestant_versions') IS NOT NULL
       OR json_type(machine_json, '$.tools') IS NOT NULL;
