"""Cells: one figure of one group of tests (median, interval, flags), how groups are keyed
and written, and the verdicts between them."""
