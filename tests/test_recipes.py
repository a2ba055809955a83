"""The rooms' READMEs (serverlab/, engine/src/, contestants/) stay true: every file and
folder they name exists, and every name they say a file holds (`matrix.py` (`BEHAVIOURS`,
`SCENARIO_FIELDS`), `plan/pacer/mod.rs` `with_pacers!`) is in that file. A rename that
leaves a recipe pointing at nothing fails here. Four recipes are followed in a scratch
copy: engine/src/README.md's behaviour, which must then build, and its pacer, which must
then build and keep the engine's layers; serverlab/README.md's verify
case, which `verify` must then run and judge; and its figure, which the report of the golden
database must then show."""

import gzip
import json
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from lint_scripts import package_copy

from serverlab.base.paths import REPO_ROOT, spec_cases_dir
from serverlab.conformance.outcome import FAIL, PASS
from serverlab.conformance.verify import verify_contestant
from serverlab.contestant.manifest import find

DATA = Path(__file__).parent / "data" / "golden-report"
READMES = [
    REPO_ROOT / "serverlab/README.md",
    REPO_ROOT / "engine/src/README.md",
    REPO_ROOT / "contestants/README.md",
]
PLACE = re.compile(r"`([\w./-]+(?:/|\.(?:rs|py|toml|md|sh|json|j2)))`")
HELD = re.compile(r"\s*(?:\(([^)]*)\)|`([A-Za-z_][\w.!]*)`)")
NAME = re.compile(r"`([A-Za-z_][\w!]*)")
# A placeholder or pattern names no one file.
TEMPLATE = re.compile(r"NAME|PART|\*|<")


def found(readme: Path, place: str, row: list[Path]) -> Path | None:
    """Where a README's path leads: in the folders its table row is about, beside
    the README, from the repository, or in serverlab/ or engine/src/ (a room names its own
    files without their folder)."""
    bases = [*row, readme.parent, REPO_ROOT, REPO_ROOT / "serverlab", REPO_ROOT / "engine/src"]
    for base in bases:
        path = (base / place.rstrip("/")).resolve()
        if path.exists():
            return path
    return None


def mentions(readme: Path) -> list[tuple[str, list[str], list[Path]]]:
    """(path, the names said to be in it, the folders its table row is about) for every
    path a README names."""
    out = []
    for line in readme.read_text().splitlines():
        row = []
        if line.startswith("|"):
            naming = "|".join(line.split("|")[1:-2])  # every cell but the last, "holds"
            row = [found(readme, f, []) for f in PLACE.findall(naming) if f.endswith("/")]
            row = [folder for folder in row if folder is not None]
        for match in PLACE.finditer(line):
            held = HELD.match(line, match.end())
            names = []
            if held and held.group(1):
                names = NAME.findall(held.group(1))
            elif held and held.group(2):
                names = [held.group(2)]
            names = [n for n in names if not n.islower() or "_" in n]
            out.append((match.group(1), names, row))
    return out


@pytest.mark.parametrize("readme", READMES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_every_file_a_room_names_exists_and_holds_what_it_says(readme):
    missing = []
    for place, names, row in mentions(readme):
        if TEMPLATE.search(place):
            continue
        path = found(readme, place, row)
        if path is None:
            missing.append(f"{place}: no such file or folder")
            continue
        if path.is_file():
            text = path.read_text()
            missing += [f"{place}: no {name}" for name in names if name not in text]
    assert missing == []


def test_a_recipe_naming_a_table_that_is_gone_fails(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("Its keys in `run/plan/suite/matrix.py` (`BEHAVIOURS`, `NO_SUCH_TABLE`).\n")
    ((place, names, row),) = mentions(readme)
    path = found(readme, place, row)
    assert path == REPO_ROOT / "serverlab/run/plan/suite/matrix.py"
    assert [n for n in names if n not in path.read_text()] == ["NO_SUCH_TABLE"]


SAMPLE_SPEC = """//! Plan stage: a behaviour planted by tests/test_recipes.py.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::Kind;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleSpec {}

impl Kind for SampleSpec {
    fn is_plain(&self) -> bool {
        true
    }
}
"""
SAMPLE_LOOP = """//! Behaviours stage: a behaviour planted by tests/test_recipes.py: plain requests.

use crate::plan::{SampleSpec, ValidPlan};

impl super::Loop for SampleSpec {
    fn build<R: super::Runner>(&self, plan: &ValidPlan, worker: usize, runner: R) -> R::Out {
        super::plain::build(plan, worker, runner)
    }
}
"""


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{path.name} no longer holds {old!r}: the recipe's step is gone"
    path.write_text(text.replace(old, new, 1))


def test_a_behaviour_planted_by_the_engines_recipe_builds(tmp_path):
    src = scratch_engine(tmp_path)
    # The recipe: the spec's file, its line in with_kinds!, its loop's file.
    (src / "plan/behaviour/sample.rs").write_text(SAMPLE_SPEC)
    edit(
        src / "plan/behaviour/mod.rs",
        "            Syslog(SyslogSpec, SyslogFlags) in syslog,\n",
        "            Syslog(SyslogSpec, SyslogFlags) in syslog,\n"
        "            /// Planted.\n            Sample(SampleSpec, NoFlags) in sample,\n",
    )
    (src / "behaviours/sample.rs").write_text(SAMPLE_LOOP)
    assert_builds(tmp_path)


def scratch_engine(tmp_path: Path) -> Path:
    """A copy of the engine's sources and lock file in `tmp_path`; its src folder."""
    engine = REPO_ROOT / "engine"
    for name in ("Cargo.toml", "Cargo.lock"):
        shutil.copy(engine / name, tmp_path / name)
    shutil.copytree(engine / "src", tmp_path / "src")
    return tmp_path / "src"


def assert_builds(crate: Path) -> None:
    """The scratch copy at `crate` builds, in the engine's own target folder: its
    dependencies are built there already; the copy, at another path, is a crate of its own
    in it."""
    done = subprocess.run(
        [
            "cargo",
            "check",
            "--release",
            "--locked",
            "--target-dir",
            str(REPO_ROOT / "engine/target"),
        ],
        cwd=crate,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]


SAMPLE_PACER = """//! Plan stage: a pacer planted by tests/test_recipes.py: one client.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{Clients, Pace, PaceFlags, PacerSpec, PlanView, Share};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SampleSpec {}

impl Pace for SampleSpec {
    fn latency_bound(&self, plan: &PlanView) -> bool {
        plan.connections == 1
    }
    fn concurrency(&self, _: &PlanView) -> Option<u64> {
        Some(1)
    }
    fn clients(&self, _: &PlanView, share: &Share) -> Clients {
        Clients::back_to_back(share.mine(1).map(|_| share.start))
    }
}

#[derive(Debug, Clone, Default, clap::Args)]
pub struct SampleFlags {
    /// Planted
    #[arg(long)]
    pub sample: bool,
}

impl PaceFlags for SampleFlags {
    const NAME: &'static str = "--sample";
    fn spec(&self) -> Option<PacerSpec> {
        self.sample.then_some(PacerSpec::Sample(SampleSpec {}))
    }
}
"""


def test_a_pacer_planted_by_the_engines_recipe_builds_and_keeps_the_layers(tmp_path):
    src = scratch_engine(tmp_path)
    # The recipe: the spec's file and its line in with_pacers!.
    (src / "plan/pacer/sample.rs").write_text(SAMPLE_PACER)
    edit(
        src / "plan/pacer/mod.rs",
        "            Users(UsersSpec, UsersFlags) in users,\n",
        "            Users(UsersSpec, UsersFlags) in users,\n"
        "            /// Planted.\n            Sample(SampleSpec, SampleFlags) in sample,\n",
    )
    layers = subprocess.run(
        [sys.executable, REPO_ROOT / "scripts/engine-layers", src, REPO_ROOT / "engine/LAYERS"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert layers.returncode == 0, layers.stdout
    assert_builds(tmp_path)


PLANTED_CASES = """
[[case]]
id = "perf.planted_query"
about = "planted by tests/test_recipes.py: a query string does not change /perf"
request = { target = "/perf?planted=1" }
expect = { status = 200, content_length = 84 }

[[case]]
id = "perf.planted_wrong_length"
about = "planted by tests/test_recipes.py: a case no correct server passes"
request = { target = "/perf" }
expect = { status = 200, content_length = 85 }
"""


def test_a_verify_case_planted_by_the_recipe_is_run_and_judged(tmp_path, contestants_dir):
    # The recipe: a [[case]] in spec/cases/PART.toml, request and expect, data only.
    cases = tmp_path / "cases"
    shutil.copytree(spec_cases_dir(), cases)
    with (cases / "perf.toml").open("a") as part:
        part.write(PLANTED_CASES)
    report = verify_contestant(find("reference"), pattern="perf.planted_*", cases_dir=cases)
    verdicts = {result.case_id: result.status for result in report.results}
    assert verdicts == {"perf.planted_query": PASS, "perf.planted_wrong_length": FAIL}


PLANTED_FIGURE = """
METRICS = (
    *METRICS,
    Figure(
        "planted",
        "requests answered (planted)",
        "",
        True,
        lambda test: summary_number(test, "requests"),
        window=ENGINE_WINDOW,
        source="engine",
    ),
)
METRICS_BY_NAME = {m.name: m for m in METRICS}
"""


def test_a_figure_planted_by_the_recipe_reaches_the_report(tmp_path):
    # The recipe: a Figure row in METRICS reading the engine summary (summary_number).
    package = package_copy(tmp_path / "scratch")
    with (package / "results/report/figures/table.py").open("a") as metrics:
        metrics.write(PLANTED_FIGURE)
    db = tmp_path / "lab.db"
    golden = sqlite3.connect(db)
    golden.executescript(gzip.decompress((DATA / "lab.sql.gz").read_bytes()).decode())
    golden.close()
    # The scratch package comes first on the path: it, not the installed one, is imported.
    program = f"import sys; sys.path.insert(0, {str(package.parent)!r}); "
    program += "from serverlab.cli import main; main()"
    done = subprocess.run(
        [sys.executable, "-c", program, "report", "all", "--db", str(db), "--json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    cells = [c for c in json.loads(done.stdout)["cells"] if c["metric"] == "planted"]
    requests = sqlite3.connect(db).execute(
        "SELECT scenario, contestant, json_extract(summary_json, '$.requests') FROM tests"
    )
    by_cell: dict[tuple, list] = {}
    for scenario, contestant, count in requests:
        by_cell.setdefault((scenario, contestant), []).append(count)
    assert {(c["scenario"], c["contestant"]): sorted(c["values"]) for c in cells} == {
        key: sorted(map(float, counts)) for key, counts in by_cell.items()
    }
    assert all(c["median"] == statistics.median(c["values"]) for c in cells)
