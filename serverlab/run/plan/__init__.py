"""Suite/plan stage: the only one that reads a suite. A suite file is loaded and expanded
into permutations (the `suite` package), each becomes a test plan (`planner`, which asks
each permutation once for what it is and costs; the descriptor cap's
refusals in `descriptors`), and the plans run in order, committed one by one (`runner`,
with `progress` and `paired` runs), each handed to an executor as its plan alone."""
