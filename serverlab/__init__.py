"""serverlab: compare server architectures under load, against one common spec.

The packages follow the pipeline, and each may import only those below it
(checked by import-linter in `make lint`):

    cli, commands           the `serverlab` command: flags, then the work each command does
    run, conformance        the stages: running a suite (suite -> plan -> executor);
                            verifying a contestant against spec/cases
    results, contestant     the database and what is read from it; the servers under test
    base                    paths, process ownership, signals, console, HTTP client
"""

__version__ = "0.1.0"
