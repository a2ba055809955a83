"""scripts/class-names: no class name is defined twice in the serverlab package."""

import re

from lint_scripts import assert_tree_passes, package_copy, run_script


def class_names(*args):
    return run_script("class-names", *args)


def planted(tmp_path, module: str, text: str):
    """A copy of the package with `text` as the new module `module`."""
    package = package_copy(tmp_path)
    (package / module).write_text(text)
    return package


def test_the_package_as_committed_defines_each_class_name_once():
    assert_tree_passes("class-names", "each name defined once")


def test_a_planted_second_suite_class_fails_and_names_both_places(tmp_path):
    stray = '"""The run stage has this class already."""\n\n\nclass Suite:\n    pass\n'
    done = class_names(planted(tmp_path, "results/report/stray.py", stray))
    assert done.returncode == 1
    assert re.search(
        r"^class-names: Suite is defined 2 times: "
        r"serverlab/results/report/stray\.py:4 and serverlab/run/plan/suite/file\.py:\d+$",
        done.stdout,
        re.M,
    ), done.stdout


def test_a_nested_class_counts_and_a_name_in_a_string_does_not(tmp_path):
    stray = 'NOTE = "class Planned: is only text"\n\n\ndef f():\n    class Store:\n        pass\n'
    done = class_names(planted(tmp_path, "base/stray.py", stray))
    assert done.returncode == 1
    assert re.search(
        r"Store is defined 2 times: serverlab/base/stray\.py:5 and serverlab/results/store\.py:\d+",
        done.stdout,
    ), done.stdout
    assert "Planned" not in done.stdout
