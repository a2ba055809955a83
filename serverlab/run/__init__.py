"""Running a suite: suite file -> permutations -> one test plan each -> executed against a
fresh server with the engine, the monitor and the control calls -> a recorded test. Also
what a run needs of the machine (limits, pinning, shaped links, file sets) and what it
cleans up after a dead run."""
