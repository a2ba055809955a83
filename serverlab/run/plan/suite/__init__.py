"""Suite stage: a suite file (`suites/*.toml`) read, checked and expanded into permutations.

Any scalar field of a scenario may be given as a list; each list is a matrix dimension and
the scenario expands into the cartesian product. Tunables are matrix dimensions too. Errors
name the file, the line and the reason, so a suite is fixed in one go rather than by trial.

Bottom to top: `permutation` (one test, and what it is and costs), `file` (the TOML, line
lookup, `SuiteError`, the loaded `Suite`), `tables` (needs, links, file sets), `profiles`
(scaling and selection), `matrix` (scenario keys, expansion, combination rules) and `load`
(`load_suite`). Import each name from its module: this file re-exports nothing.
"""
