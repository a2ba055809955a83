"""Conformance: `serverlab verify`. The cases of spec/cases (data), the check kinds that need
a program (`checks/`), and the run of every case of a contestant's spec parts against a
fresh server, each case PASS, WARN or FAIL with its reason."""
