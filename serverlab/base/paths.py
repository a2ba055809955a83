"""Where serverlab finds the repository's folders; overridable for tests and other trees."""

import os
from pathlib import Path

# serverlab/base/paths.py -> the repository root, three levels up.
REPO_ROOT = Path(__file__).resolve().parents[2]
CONTESTANTS_ENV = "SERVERLAB_CONTESTANTS"


def contestants_root(override: str | os.PathLike | None = None) -> Path:
    """The folder holding `<name>/contestant.toml`: the argument, the env var, or the repo's."""
    if override:
        return Path(override)
    from_env = os.environ.get(CONTESTANTS_ENV)
    return Path(from_env) if from_env else REPO_ROOT / "contestants"


def spec_cases_dir() -> Path:
    return REPO_ROOT / "spec" / "cases"


def spec_file() -> Path:
    return REPO_ROOT / "spec" / "SPEC.md"


def apt_ensure_script() -> Path:
    return REPO_ROOT / "scripts" / "apt-ensure"
