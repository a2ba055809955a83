-- Version 5: a test keeps what planned it apart from what happened when it ran.
-- plan_json: the TestPlan it was run from (NULL for tests older than plans).
-- run_info_json: what the executor bound where it ran (ports, pids, CPUs, namespace) and
-- what happened on the way (priming outcomes, the engine plan as bound). Older versions
-- wrote these run-time keys into params_json, where they split one permutation's repeats
-- into rows of their own in the report; they move over.
ALTER TABLE tests ADD COLUMN plan_json TEXT;
ALTER TABLE tests ADD COLUMN run_info_json TEXT NOT NULL DEFAULT '{}';
UPDATE tests SET run_info_json = json_set(run_info_json, '$.priming',
        json(json_extract(params_json, '$.priming')))
    WHERE json_type(params_json, '$.priming') IS NOT NULL;
UPDATE tests SET run_info_json = json_set(run_info_json, '$.link',
        json(json_extract(params_json, '$.link_as_run')))
    WHERE json_type(params_json, '$.link_as_run') IS NOT NULL;
UPDATE tests SET run_info_json = json_set(run_info_json, '$.engine_plan',
        json(json_extract(params_json, '$.engine_plan')))
    WHERE json_type(params_json, '$.engine_plan') IS NOT NULL;
UPDATE tests SET params_json = json_remove(params_json, '$.priming', '$.link_as_run',
        '$.engine_plan');
