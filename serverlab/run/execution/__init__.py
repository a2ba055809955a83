"""Execution stage: one test plan (`testplan.TestPlan`, defined here because it is what this
stage reads) becomes one recorded test on this machine. It never reads the suite the plan
came from: a fresh server, the load engine (`engine`, `traffic`), the monitor and its kernel
readings (`monitor`, `procfs`, `sockdiag`), control calls (`timed`), a syslog receiver
(`receiver`), the runtime's side file (`signals`) and the test's status (`validity`)."""
