"""Host preparation stage: what a run needs of this machine, made ready before (and
cleaned up after) a test: its description and CPU pinning (`machine`), its limits
(`tune`), shaped links (`shapedlink`), file sets (`fileset`), and what a dead run left
behind (`leftovers`). It imports neither suites nor test plans."""
