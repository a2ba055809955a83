"""scripts/class-names: no class name is defined twice in the serverlab package."""

import re
import shutil
import subprocess
import sys

from serverlab.base.paths import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts/class-names"


def class_names(*args):
    return subprocess.run(
        [sys.executable, str(SCRIPT), *map(str, args)], capture_output=True, text=True, timeout=60
    )


def planted(tmp_path, module: str, text: str):
    """A copy of the package with `text` as the new module `module`."""
    package = tmp_path / "serverlab"
    shutil.copytree(REPO_ROOT / "serverlab", package, ignore=shutil.ignore_patterns("__pycache__"))
    (package / module).write_text(text)
    return package


def test_the_package_as_committed_defines_each_class_name_once():
    done = class_names()
    assert done.returncode == 0, done.stdout
    assert "each name defined once" in done.stdout


def test_a_planted_second_suite_class_fails_and_names_both_places(tmp_path):
    stray = '"""The run stage has this class already."""\n\n\nclass Suite:\n    pass\n'
    done = class_names(planted(tmp_path, "results/report/stray.py", stray))
    assert done.returncode == 1
    assert re.search(
        r"^class-names: Suite is defined 2 times: "
        r"serverlab/results/report/stray\.py:4 and serverlab/run/plan/suite\.py:\d+$",
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
