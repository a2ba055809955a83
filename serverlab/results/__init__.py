"""Results: the SQLite database every test is committed to (schema, migrations, one writer
at a time), and what is read back from it: statistics over repeats, comparisons, CSV
export and the HTML report."""
