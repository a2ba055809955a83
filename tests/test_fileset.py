import hashlib
from pathlib import Path

from serverlab.run.host import fileset
from serverlab.run.plan.suite.tables import FILESET_DEFAULTS

SPEC = {**FILESET_DEFAULTS, "seed": 3, "count": 40, "min_bytes": 1000, "max_bytes": 300_000}


def _hashes(root: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.glob("*.bin")}


def test_the_same_spec_gives_the_same_names_sizes_and_bytes(tmp_path):
    first = fileset.materialize(SPEC, tmp_path / "a")
    second = fileset.materialize(dict(SPEC), tmp_path / "b")
    assert first.entries == second.entries
    assert _hashes(first.root) == _hashes(second.root)
    assert len(_hashes(first.root)) == 40
    for entry in first.entries:
        assert (first.root / entry.name).stat().st_size == entry.size
        assert SPEC["min_bytes"] <= entry.size <= SPEC["max_bytes"]


def test_another_seed_gives_another_set(tmp_path):
    first = fileset.materialize(SPEC, tmp_path)
    other = fileset.materialize({**SPEC, "seed": 4}, tmp_path)
    assert first.root != other.root
    assert [e.size for e in first.entries] != [e.size for e in other.entries]
    assert _hashes(first.root)["f0000.bin"] != _hashes(other.root)["f0000.bin"]


def test_files_of_one_set_differ_from_each_other(tmp_path):
    made = fileset.materialize({**SPEC, "size_distribution": "uniform"}, tmp_path)
    assert len(set(_hashes(made.root).values())) == 40


def test_a_cached_set_is_not_generated_again(tmp_path):
    made = fileset.materialize(SPEC, tmp_path)
    marker = made.root / "f0000.bin"
    before = marker.stat().st_mtime_ns
    again = fileset.materialize(SPEC, tmp_path)
    assert again.root == made.root and marker.stat().st_mtime_ns == before


def test_an_interrupted_generation_is_redone(tmp_path):
    made = fileset.materialize(SPEC, tmp_path)
    (made.root / fileset.COMPLETE_MARKER).unlink()
    (made.root / "f0001.bin").write_bytes(b"truncated")
    again = fileset.materialize(SPEC, tmp_path)
    assert (again.root / "f0001.bin").stat().st_size == again.entries[1].size


def test_zipf_popularity_is_skewed_and_sums_to_one(tmp_path):
    entries = fileset.entries_for(SPEC)
    weights = sorted((e.weight for e in entries), reverse=True)
    assert abs(sum(weights) - 1) < 1e-9
    assert weights[0] / weights[1] == 2 ** SPEC["zipf_s"]
    assert weights[0] > 5 * weights[-1]
    uniform = fileset.entries_for({**SPEC, "popularity": "uniform"})
    assert {round(e.weight, 12) for e in uniform} == {round(1 / 40, 12)}


def test_lognormal_sizes_spread_over_the_orders_of_magnitude():
    sizes = sorted(e.size for e in fileset.entries_for({**SPEC, "count": 400}))
    median = sizes[len(sizes) // 2]
    assert 5_000 < median < 60_000  # geometric middle of 1 kB .. 300 kB is ~17 kB
    assert sizes[0] < 4_000 and sizes[-1] > 100_000


def test_weighted_paths_name_every_file_under_files(tmp_path):
    made = fileset.materialize(SPEC, tmp_path)
    paths = made.weighted_paths()
    assert len(paths) == 40
    assert paths[0]["path"] == "/files/f0000.bin"
    assert abs(sum(p["weight"] for p in paths) - 1) < 1e-6
