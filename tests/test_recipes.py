"""The rooms' READMEs (serverlab/, engine/src/, contestants/) stay true: every file and
folder they name exists, and every name they say a file holds (`suite.py` (`BEHAVIOURS`,
`SCENARIO_FIELDS`), `plan/validate.rs` `check_pacer`) is in that file. A rename that
leaves a recipe pointing at nothing fails here."""

import re
from pathlib import Path

import pytest

from serverlab.base.paths import REPO_ROOT

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
    readme.write_text("Its keys in `run/plan/suite.py` (`BEHAVIOURS`, `NO_SUCH_TABLE`).\n")
    ((place, names, row),) = mentions(readme)
    path = found(readme, place, row)
    assert path == REPO_ROOT / "serverlab/run/plan/suite.py"
    assert [n for n in names if n not in path.read_text()] == ["NO_SUCH_TABLE"]
