"""scripts/python-cycles: import cycles between serverlab's modules, a package's `__init__`
and deferred imports counted."""

from lint_scripts import assert_tree_passes, package_copy, run_script


def cycles(*args):
    return run_script("python-cycles", *args)


def planted(tmp_path, file: str, line: str, *, at_end: bool = False):
    """A copy of serverlab/ with `line` put on top (or at the end) of `file`."""
    path = package_copy(tmp_path) / file
    text = path.read_text()
    path.write_text(text + "\n" + line + "\n" if at_end else line + "\n" + text)
    return tmp_path


def test_serverlab_as_committed_has_no_import_cycle():
    assert_tree_passes("python-cycles", "no import cycle")


def test_a_deferred_import_of_the_registry_that_includes_the_module_is_a_cycle(tmp_path):
    line = "def _kinds():\n    from serverlab.conformance.checks import CHECKS\n    return CHECKS"
    root = planted(tmp_path, "conformance/checks/carried.py", line, at_end=True)
    done = cycles(root)
    assert done.returncode == 1
    assert "cycle: serverlab.conformance.checks, serverlab.conformance.checks.carried" in (
        done.stdout
    )
    assert "carried -> serverlab.conformance.checks (serverlab/conformance/checks/carried.py:" in (
        done.stdout
    )


def test_a_submodule_named_through_its_package_whose_init_leads_back_is_a_cycle(tmp_path):
    # report/__init__.py imports builder, which (through the figures) reaches push; push
    # naming selection as `from serverlab.results.report import selection` runs the
    # package's __init__ first.
    line = "from serverlab.results.report import selection"
    root = planted(tmp_path, "results/report/figures/push.py", line)
    done = cycles(root)
    assert done.returncode == 1
    assert "serverlab.results.report.figures.push -> serverlab.results.report (" in done.stdout
    assert "serverlab.results.report -> serverlab.results.report.builder (" in done.stdout


def test_a_relative_import_that_closes_a_cycle_is_read(tmp_path):
    # base.spec imports base.paths; a relative import back closes the pair.
    done = cycles(planted(tmp_path, "base/paths.py", "from . import spec"))
    assert done.returncode == 1
    # Read as an edge of its own, whatever else the cycle holds (spec reaches paths by two
    # ways: directly and through engine_facts).
    assert "serverlab.base.paths -> serverlab.base.spec (serverlab/base/paths.py:1)" in done.stdout
    assert "serverlab.base.spec -> serverlab.base.paths (" in done.stdout
