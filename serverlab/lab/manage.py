"""`serverlab lab up | down | status`: a lab's life, recorded in its state file.

The state file (serverlab.base.owner.lab_state_file) is written before anything is made,
marked `building` with the builder's pid, and marked `up` once every Ray node answers.
While it exists the lab's processes are alive to the reaper; a lab whose builder died
half-way, or whose file is gone, is stale, and the next `lab up` or `serverlab run`
removes what it left.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil

from serverlab.base import owner, scratch
from serverlab.base.netns import existing
from serverlab.lab import network, nodes
from serverlab.lab.topology import Lab, LabError, is_lab_namespace, plan_lab

# One lab a machine is what a user needs; tests name theirs so as not to meet a user's.
DEFAULT_NAME = os.environ.get("SERVERLAB_LAB", "main")
BUILDING, UP = "building", "up"


def down_command(name: str) -> str:
    """The command that takes the lab `name` down, as a user would type it: `lab down`
    takes no name, it reads SERVERLAB_LAB as every lab command does."""
    prefix = "" if name == DEFAULT_NAME else f"SERVERLAB_LAB={shlex.quote(name)} "
    return f"{prefix}serverlab lab down"


def up(
    generators: int,
    rate_mbit: float | None = None,
    name: str = DEFAULT_NAME,
    environment: dict[str, dict[str, str]] | None = None,
    delay_ms: float = 0.0,
    loss_pct: float = 0.0,
    progress=None,
    ray_nodes: bool = True,
) -> Lab:
    """Builds the lab and starts its Ray nodes; refuses a lab of that name that is up.
    `progress` counts the nodes as they start (``serverlab.base.progress.Tally``).
    Without `ray_nodes` only the links are made (the links' own tests): the lab still has
    its state file, so no `serverlab run` elsewhere takes it for a dead lab and reaps it."""
    lab = plan_lab(name, generators, rate_mbit, delay_ms, loss_pct)
    reap_stale()
    if owner.lab_state_file(name).is_file():
        raise LabError(f"lab {name!r} is already up (run `{down_command(name)}` first)")
    previous = _previous_processes(name)
    if previous:
        raise LabError(f"a previous lab's processes are still alive: {nodes.describe(previous)}")
    _write_state(lab, BUILDING)
    try:
        link = network.build(lab)
        if ray_nodes:
            nodes.start(lab, environment, progress)
    except BaseException:
        _take_down(lab)
        raise
    _write_state(lab, UP, link)
    return lab


def down(name: str = DEFAULT_NAME) -> dict[str, int]:
    """Stops the lab's processes and deletes its namespaces; a lab that is not up, or only
    half there, is removed just the same."""
    lab = read(name) or plan_lab(name, 1)
    return _take_down(lab)


def read(name: str = DEFAULT_NAME) -> Lab | None:
    path = owner.lab_state_file(name)
    try:
        return Lab.from_file(path)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def link(name: str = DEFAULT_NAME) -> dict:
    """The lab's links as `lab up` made and measured them (serverlab.lab.network)."""
    try:
        return json.loads(owner.lab_state_file(name).read_text()).get("link") or {}
    except (OSError, ValueError, AttributeError):
        return {}


def status(name: str = DEFAULT_NAME) -> str | None:
    try:
        return json.loads(owner.lab_state_file(name).read_text()).get("status")
    except (OSError, ValueError, AttributeError):
        return None


def reap_stale() -> list[str]:
    """Removes labs whose builder died half-way or whose state file is gone: their
    processes, namespaces and temp dirs. Returns their names."""
    names = {is_lab_namespace(n) for n in existing()} - {None}
    for path in owner.LAB_STATE_DIR.glob("*.json"):
        names.add(path.stem)
    for folder in scratch.root().glob(f"{scratch.LAB_PREFIX}*"):
        names.add(folder.name.removeprefix(scratch.LAB_PREFIX))
    stale = [name for name in sorted(names) if not _alive(name)]
    for name in stale:
        down(name)
    return stale


def _previous_processes(name: str) -> list:
    """Processes of this lab (none may run before it is built) and of labs that are not
    up: a new lab beside them would share addresses, ports or files with them."""
    found = nodes.lab_processes(name)
    for other, processes in nodes.session_processes().items():
        if other != name and not _alive(other):
            found += processes
    return found


def _alive(name: str) -> bool:
    try:
        state = json.loads(owner.lab_state_file(name).read_text())
    except (OSError, ValueError):
        return False
    if state.get("status") == UP:
        return True
    builder = state.get("builder", "")
    return owner.alive(builder)


def _write_state(lab: Lab, state: str, link: dict | None = None) -> None:
    path = owner.lab_state_file(lab.name)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {**json.loads(lab.to_json()), "status": state, "builder": owner.token()}
    if link is not None:
        record["link"] = link
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(record, indent=2))
    os.replace(temporary, path)


def _take_down(lab: Lab) -> dict[str, int]:
    # The state file goes last: until then the lab's processes are not orphans to anyone.
    processes = nodes.stop(lab.name)
    namespaces = network.remove(lab)
    shutil.rmtree(scratch.lab_folder(lab.name), ignore_errors=True)
    owner.lab_state_file(lab.name).unlink(missing_ok=True)
    return {"processes": processes, "namespaces": len(namespaces)}
