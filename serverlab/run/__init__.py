"""Running a suite: suite file -> permutations -> one test plan each -> executed against a
fresh server with the engine, the monitor and the control calls -> a recorded test.

Three stages, one package each, layered in this order (pyproject.toml, `lint-imports`): a
stage imports only the stages below it, so the executor never reads the suite.

- `plan`: the suite read and expanded, each permutation made a test plan, and the plans run
  in order (the runner, its progress, paired runs);
- `execution`: one test plan (the `TestPlan` it defines) becomes one recorded test on this
  machine: the server, the engine, the monitor, the control calls, the test's status;
- `host`: what a run needs of the machine: its description, limits, pinning, shaped links,
  file sets, and the cleanup after a dead run.
"""
