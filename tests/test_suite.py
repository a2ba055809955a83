from pathlib import Path

import pytest

from serverlab.suite import SuiteError, load_suite

KNOWN = {"node-http", "java-tomcat-blocking", "go-nethttp"}


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def test_lists_expand_into_a_matrix_with_tunables(tmp_path):
    path = write(
        tmp_path,
        """
name = "m"
repeats = 2
contestants = ["node-http", "java-tomcat-blocking"]

[[scenario]]
name = "push"
behaviour = ["longpoll", "comet"]
clients = [1000, 5000]
duration_s = 60
longpoll_duration_ms = 30000
emit_interval_ms = [0, 1000, 5000]
[scenario.tunables.java-tomcat-blocking]
threads = [200, 2000]
""",
    )
    suite = load_suite(path, known_contestants=KNOWN)
    # node: 2*2*3 = 12; tomcat: 12 * 2 thread settings = 24
    assert len(suite.permutations) == 36
    assert len(suite.tests()) == 72
    tomcat = [p for p in suite.permutations if p.contestant == "java-tomcat-blocking"]
    assert {p.tunables["threads"] for p in tomcat} == {"200", "2000"}
    assert len({p.key for p in suite.permutations}) == 36


def test_scale_shortens_durations_only(tmp_path):
    path = write(
        tmp_path,
        """
contestants = ["node-http"]
[[scenario]]
name = "fast"
behaviour = "keepalive"
clients = 100
duration_s = 100
ramp_up_s = 10
""",
    )
    (perm,) = load_suite(path, scale=0.1).permutations
    assert perm.params["duration_s"] == 10
    assert perm.params["ramp_up_s"] == 1
    assert perm.params["clients"] == 100


def test_repeats_are_interleaved_across_permutations(tmp_path):
    path = write(
        tmp_path,
        """
repeats = 2
contestants = ["node-http", "go-nethttp"]
[[scenario]]
name = "fast"
behaviour = "keepalive"
duration_s = 1
""",
    )
    order = [(p.contestant, r) for p, r in load_suite(path).tests()]
    assert order == [("node-http", 0), ("go-nethttp", 0), ("node-http", 1), ("go-nethttp", 1)]


def test_contestants_filter_narrows_and_rejects_strangers(tmp_path):
    path = write(
        tmp_path,
        """
contestants = ["node-http", "go-nethttp"]
[[scenario]]
name = "fast"
behaviour = "keepalive"
duration_s = 1
""",
    )
    suite = load_suite(path, only=["go-nethttp"])
    assert [p.contestant for p in suite.permutations] == ["go-nethttp"]
    with pytest.raises(SuiteError, match="names no test"):
        load_suite(path, only=["nginx"])


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        ('[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduraton_s = 5\n', 6, "unknown"),
        ('[[scenario]]\nname = "a"\nbehaviour = "teleport"\nduration_s = 5\n', 5, "behaviour"),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 5\nrate = 9\n',
            7,
            "open pacer",
        ),
        ('[[scenario]]\nname = "a"\nbehaviour = "longpoll"\nduration_s = 5\n', 5, "longpoll"),
        ('[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nclients = "many"\n', 6, "int"),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 5\n'
            "emit_interval_ms = 1000\n",
            7,
            "only applies",
        ),
        ('[[scenario]]\nname = "a"\nbehaviour = "keepalive"\n', 4, "duration_s or requests"),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 5\n'
            'contestants = ["nobody"]\n',
            7,
            "unknown contestant",
        ),
    ],
)
def test_bad_suites_name_file_line_and_reason(tmp_path, body, line, reason):
    path = write(tmp_path, 'contestants = ["node-http"]\n\n' + body)
    with pytest.raises(SuiteError, match=reason) as caught:
        load_suite(path, known_contestants=KNOWN)
    assert caught.value.line == line
    assert str(caught.value).startswith(f"{path}:{line}: ")


def test_broken_toml_reports_its_line(tmp_path):
    path = write(tmp_path, 'name = "x"\n[[scenario]\n')
    with pytest.raises(SuiteError, match="not valid TOML") as caught:
        load_suite(path)
    assert caught.value.line == 2


def test_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(SuiteError, match="cannot read"):
        load_suite(tmp_path / "nope.toml")


def test_estimate_counts_setup_ramp_and_duration(tmp_path):
    path = write(
        tmp_path,
        """
repeats = 3
contestants = ["node-http"]
[[scenario]]
name = "fast"
behaviour = "keepalive"
duration_s = 10
ramp_up_s = 4
""",
    )
    suite = load_suite(path)
    assert suite.estimated_seconds() == pytest.approx(3 * (6 + 4 + 10))
