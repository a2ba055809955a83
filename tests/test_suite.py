import re
import subprocess
import sys
from pathlib import Path

import pytest

from serverlab import commands
from serverlab.contestant.manifest import find
from serverlab.run.plan.suite.file import SuiteError
from serverlab.run.plan.suite.load import MAX_TESTS, load_suite

KNOWN = {name: find(name) for name in ("node-http", "java-tomcat-blocking", "go-nethttp")}


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


def test_a_list_of_tunable_tables_makes_one_set_each_not_their_product(tmp_path):
    """As shipped ({}) and hardened: two sets, whatever each names, beside "*"'s tunables."""
    path = write(
        tmp_path,
        """
contestants = ["node-http", "go-nethttp"]
[[scenario]]
name = "abuse"
behaviour = "keepalive"
duration_s = 5
tunables."*" = { gomaxprocs = 0 }
tunables.go-nethttp = [{}, { read_header_timeout_s = 2, h2_max_streams = [100, 200] }]
""",
    )
    with pytest.raises(SuiteError, match="node-http has no tunable 'gomaxprocs'"):
        load_suite(path, known_contestants=KNOWN)
    path.write_text(path.read_text().replace('tunables."*" = { gomaxprocs = 0 }\n', ""))
    suite = load_suite(path, known_contestants=KNOWN)
    go = [p.tunables for p in suite.permutations if p.contestant == "go-nethttp"]
    assert go == [
        {},
        {"read_header_timeout_s": "2", "h2_max_streams": "100"},
        {"read_header_timeout_s": "2", "h2_max_streams": "200"},
    ]
    assert [p.tunables for p in suite.permutations if p.contestant == "node-http"] == [{}]


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


def checked(path: Path, profile: str | None = None):
    """The suite as `serverlab run --dry-run` takes it: loaded, planned, and every engine
    plan judged by the engine (`serverlab-load --check`)."""
    return commands.plan_suite(str(path), 1.0, None, None, profile)


@pytest.mark.parametrize(
    ("body", "line", "reason"),
    [
        ('[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduraton_s = 5\n', 6, "unknown"),
        ('[[scenario]]\nname = "a"\nbehaviour = "teleport"\nduration_s = 5\n', 5, "teleport"),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 5\nrate = 9\n',
            7,
            "unknown field `rate`",
        ),
        ('[[scenario]]\nname = "a"\nbehaviour = "longpoll"\nduration_s = 5\n', 5, "duration_ms"),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 5\nclose = "client"\n',
            7,
            "unknown field `close`",
        ),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "new-connection"\nduration_s = 5\n'
            'close = "later"\n',
            7,
            "unknown variant `later`",
        ),
        ('[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nclients = "many"\n', 6, "int"),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\nduration_s = 5\n'
            "emit_interval_ms = 1000\n",
            7,
            "only applies",
        ),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\n',
            4,
            "request count .* or a duration",
        ),
        (
            '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\npacer = "sequential"\n'
            "clients = 3\nrequests = 10\n",
            7,
            "clients = 3",
        ),
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
        checked(path)
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


SEED_SUITE = """
seed = "004"
contestants = ["node-http", "go-nethttp"]

[needs]
nofile = 65536
tcp_tw_reuse = 1

[links.slow]
rate_mbit = 10
delay_ms = 50

[filesets.zipfy]
seed = 7
count = 20
max_bytes = 50000

[profiles.quick]
duration_scale = 0.1
count_scale = 0.01
[profiles.quick.only]
clients = [1000]
contestants = ["go-nethttp"]

[[scenario]]
name = "push"
behaviour = "keepalive"
clients = [1000, 5000]
duration_s = 100
requests = 200000
priming_runs = 1
link = "slow"
files = "zipfy"

[[scenario]]
name = "flood"
behaviour = "syslog"
syslog_messages = 1000000
syslog_transport = "tcp"
syslog_framing = "octet"
"""


def test_a_profile_scales_durations_and_counts_and_narrows_the_matrix(tmp_path):
    path = write(tmp_path, SEED_SUITE)
    full = load_suite(path, known_contestants=KNOWN)
    assert len(full.permutations) == 6
    assert full.seed == "004" and full.needs == {"nofile": 65536, "tcp_tw_reuse": 1}
    assert full.links == {"slow": {"rate_mbit": 10, "delay_ms": 50}}
    assert full.filesets["zipfy"]["count"] == 20
    assert full.filesets["zipfy"]["size_distribution"] == "lognormal"
    quick = load_suite(path, known_contestants=KNOWN, profile="quick", scale=0.5)
    push, flood = quick.permutations
    assert (push.contestant, push.params["clients"]) == ("go-nethttp", 1000)
    assert push.params["duration_s"] == 5  # 100 x 0.1 x 0.5
    assert push.params["requests"] == 2000
    assert push.params["priming_runs"] == 1
    assert flood.params["syslog_messages"] == 10_000
    assert quick.profile == "quick"
    assert load_suite(path, profile="full").permutations == full.permutations


def test_priming_runs_count_in_the_estimate(tmp_path):
    path = write(tmp_path, SEED_SUITE)
    perm = load_suite(path).permutations[0]
    assert perm.estimated_seconds() == pytest.approx(6 + 2 * 100)


def _swap(text: str, old: str, new: str) -> str:
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(
    ("old", "new", "line", "reason"),
    [
        ('seed = "004"', 'seed = "9"', 2, "seed must be one of"),
        ("nofile = 65536", "nofiles = 65536", 6, "unknown needs key"),
        ("tcp_tw_reuse = 1", "tcp_tw_reuse = -1", 7, "non-negative"),
        ("rate_mbit = 10", "rate_mbit = 0", 10, "rate_mbit must be a number"),
        ("delay_ms = 50", "jitter_ms = 5", 11, "unknown key 'jitter_ms'"),
        ("delay_ms = 50", "loss_pct = 101", 11, "loss_pct must be a number >= 0 and <= 100"),
        ("delay_ms = 50", "delay_ms = nan", 11, "delay_ms must be a number >= 0 and <= 5000"),
        ("delay_ms = 50", "delay_ms = inf", 11, "delay_ms must be a number >= 0 and <= 5000"),
        ("delay_ms = 50", "delay_ms = 1e400", 11, "<= 5000, not inf"),
        ("delay_ms = 50", "delay_ms = 1e9", 11, "<= 5000, not 1000000000.0"),
        ("rate_mbit = 10", "rate_mbit = 1e12", 10, "rate_mbit must be a number >= 0.001 and <="),
        ("rate_mbit = 10", "rate_mbit = -inf", 10, "rate_mbit must be a number"),
        ("delay_ms = 50", "loss_pct = nan", 11, "loss_pct must be a number >= 0 and <= 100"),
        ("delay_ms = 50", "loss_pct = -1", 11, "loss_pct must be a number >= 0"),
        ("max_bytes = 50000", "max_bytes = 5", 16, "max_bytes < min_bytes"),
        ("count = 20", 'popularity = "pareto"', 15, "popularity must be one of"),
        ("count_scale = 0.01", "count_scal = 0.01", 20, "unknown key 'count_scal'"),
        ("clients = [1000]\n", "client = [1000]\n", 22, "no test has 'client'"),
        ('link = "slow"', 'link = "fast"', 32, "not a [links.NAME] table"),
        ('files = "zipfy"', 'files = "nope"', 33, "not a [filesets.NAME] table"),
        ("priming_runs = 1", "priming_runs = -1", 31, "priming_runs must be"),
        ('syslog_transport = "tcp"', 'syslog_transport = "sctp"', 39, "syslog_transport"),
        ('syslog_framing = "octet"', 'syslog_framing = "lines"', 40, "syslog_framing"),
    ],
)
def test_bad_seed_fields_name_file_line_and_reason(tmp_path, old, new, line, reason):
    path = write(tmp_path, _swap(SEED_SUITE, old, new))
    with pytest.raises(SuiteError, match=re.escape(reason)) as caught:
        checked(path, profile="quick")
    assert caught.value.line == line


def test_an_unknown_profile_lists_the_known_ones(tmp_path):
    with pytest.raises(SuiteError, match="no profile 'fast'.*full, quick"):
        load_suite(write(tmp_path, SEED_SUITE), profile="fast")


def test_files_only_go_with_behaviours_that_fetch_files(tmp_path):
    text = _swap(SEED_SUITE, 'behaviour = "keepalive"', 'behaviour = "comet"')
    text = _swap(text, "requests = 200000\n", "")
    with pytest.raises(SuiteError, match="files = 'zipfy': the engine refuses it: weighted"):
        checked(write(tmp_path, text))


def test_a_profile_may_ask_less_of_the_machine_than_the_full_suite(tmp_path):
    text = SEED_SUITE.replace(
        "[profiles.quick.only]", "[profiles.quick.needs]\nnofile = 20000\n[profiles.quick.only]"
    )
    path = write(tmp_path, text)
    assert load_suite(path).needs == {"nofile": 65536, "tcp_tw_reuse": 1}
    assert load_suite(path, profile="quick").needs == {"nofile": 20000, "tcp_tw_reuse": 1}
    with pytest.raises(SuiteError, match="profiles.quick.needs.nofile must be") as caught:
        load_suite(write(tmp_path, text.replace("nofile = 20000", "nofile = -1")), profile="quick")
    assert caught.value.line == 22


PROFILED = """
contestants = ["node-http"]
repeats = 3
[profiles.quick]
repeats = 1
[profiles.quick.only]
scenarios = ["b"]
[[scenario]]
name = "a"
behaviour = "keepalive"
duration_s = 1
[[scenario]]
name = "b"
behaviour = "keepalive"
duration_s = 1
"""


def test_a_profile_picks_scenarios_by_name_and_its_own_repeats(tmp_path):
    path = write(tmp_path, PROFILED)
    quick = load_suite(path, profile="quick")
    assert [p.scenario for p in quick.permutations] == ["b"] and quick.repeats == 1
    full = load_suite(path)
    assert [p.scenario for p in full.permutations] == ["a", "b"] and full.repeats == 3


@pytest.mark.parametrize(
    ("change", "line", "reason"),
    [
        (('scenarios = ["b"]', 'scenarios = ["c"]'), 7, "no scenario 'c'"),
        (("repeats = 1", "repeats = 0"), 5, "repeats must be an integer of at least 1"),
    ],
)
def test_a_profiles_scenarios_and_repeats_are_checked(tmp_path, change, line, reason):
    with pytest.raises(SuiteError, match=reason) as caught:
        load_suite(write(tmp_path, PROFILED.replace(*change)), profile="quick")
    assert caught.value.line == line


def test_a_profile_selects_tunables_as_written_in_the_file(tmp_path):
    path = write(
        tmp_path,
        """
contestants = ["node-http"]
[profiles.quick.only]
chunk_size = ["1KB"]
fast = [true]
[[scenario]]
name = "sweep"
behaviour = "keepalive"
duration_s = 1
[scenario.tunables.node-http]
chunk_size = ["1KB", "10KB"]
fast = [true, false]
""",
    )
    (perm,) = load_suite(path, profile="quick").permutations
    assert perm.tunables == {"chunk_size": "1KB", "fast": "true"}


BOUNDS = """
[[scenario]]
name = "s"
behaviour = "keepalive"
clients = 10
duration_s = 5
"""


@pytest.mark.parametrize(
    ("change", "line", "reason"),
    [
        (("duration_s = 5", "duration_s = inf"), 7, "duration_s must be a finite number"),
        (("duration_s = 5", "duration_s = nan"), 7, "duration_s must be a finite number"),
        (("duration_s = 5", "duration_s = [1, -inf]"), 7, "finite"),
        (
            ("duration_s = 5", "duration_s = 5\ntunables.node-http = { threads = 4 }"),
            8,
            r"node-http has no tunable 'threads' "
            r"\(known: backlog, h2_max_streams, headers_timeout_s, max_header_kb, syslog_mode, "
            r"workers\)",
        ),
        (
            ("duration_s = 5", 'duration_s = 5\ntunables.node-http = { backlog = "$(touch M)" }'),
            8,
            r"node-http: backlog = '\$\(touch M\)': expected an integer in 1\.\.",
        ),
        (
            ("duration_s = 5", "duration_s = 5\ntunables.node-http = [{}, 2]"),
            8,
            r"tunables\.node-http must be a table or a list of tables",
        ),
        (
            ("duration_s = 5", "duration_s = 5\ntunables.node-http = [{}, { workers = 0 }]"),
            8,
            "workers = '0': expected an integer",
        ),
        (
            ("duration_s = 5", "duration_s = 5\ntunables = { workers = 2 }"),
            8,
            r"tunables\.workers names no contestant of this scenario \(node-http\)",
        ),
        (
            ("duration_s = 5", "duration_s = 5\n[scenario.tunables.node-http]\nbacklog = [1, 0]"),
            9,
            "backlog = '0': expected an integer",
        ),
    ],
)
def test_bounds_and_tunables_are_checked_with_file_and_line(tmp_path, change, line, reason):
    text = 'contestants = ["node-http"]\n' + BOUNDS.replace(*change)
    path = write(tmp_path, text)
    with pytest.raises(SuiteError, match=reason) as caught:
        load_suite(path, known_contestants=KNOWN)
    assert caught.value.line == line, str(caught.value)
    assert not (tmp_path / "M").exists()


def test_a_suite_that_multiplies_past_the_limit_is_refused_before_expanding(tmp_path):
    sweep = ", ".join(str(n) for n in range(1, 101))
    text = 'contestants = ["node-http", "go-nethttp"]\nrepeats = 3\n' + BOUNDS.replace(
        "clients = 10", f"clients = [{sweep}]\nrate = [{sweep}]"
    ).replace("duration_s = 5", f"duration_s = [{sweep}]").replace(
        '"keepalive"', '"keepalive"\npacer = "open"'
    )
    with pytest.raises(SuiteError, match=r"would make 6,000,000 tests \(2,000,000 perm"):
        load_suite(write(tmp_path, text), known_contestants=KNOWN)
    assert MAX_TESTS == 100_000


@pytest.mark.parametrize("chosen", [None, "full", "quick"])
@pytest.mark.parametrize(
    ("old", "new", "line", "reason"),
    [
        ("count_scale = 0.01", "count_scal = 0.01", 20, "unknown key 'count_scal'"),
        ("clients = [1000]\n", "client = [1000]\n", 22, "no test has 'client'"),
        ("[profiles.quick]\n", "[profiles.slow]\nrepeat = 2\n[profiles.quick]\n", 19, "'repeat'"),
        ("[profiles.quick]\n", "[profiles]\nslow = 3\n[profiles.quick]\n", 19, "must be a table"),
    ],
)
def test_every_profiles_keys_are_checked_whether_it_is_chosen_or_not(
    tmp_path, chosen, old, new, line, reason
):
    path = write(tmp_path, _swap(SEED_SUITE, old, new))
    with pytest.raises(SuiteError, match=re.escape(reason)) as caught:
        load_suite(path, profile=chosen)
    assert caught.value.line == line


DEEP = {
    "arrays": "x = " + "[" * 500 + "]" * 500,
    "inline tables": "x = " + "{a = " * 500 + "1" + "}" * 500,
    "dotted keys": ".".join(f"k{i}" for i in range(3000)) + " = 1",
    "a table header": "[" + ".".join(f"k{i}" for i in range(3000)) + "]",
    "tunables": '[scenario.tunables."*"]\n' + ".".join("k" * 3000) + " = 1",
}


@pytest.mark.parametrize("how", DEEP)
def test_toml_nested_past_the_limit_is_refused_in_one_line_at_its_line(tmp_path, how):
    scenario = '[[scenario]]\nname = "a"\nbehaviour = "keepalive"\n'
    text = f'contestants = ["node-http"]\n{scenario}{DEEP[how]}\n'
    path = write(tmp_path, text)
    with pytest.raises(SuiteError, match="nested deeper than 100 levels") as caught:
        load_suite(path)
    assert caught.value.line == len(text.splitlines())
    done = subprocess.run(
        [sys.executable, "-c", "from serverlab.cli import main; main()", "run", str(path)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr == f"serverlab: error: {caught.value}\n"


def test_brackets_in_strings_and_comments_are_not_nesting(tmp_path):
    deep = "[" * 500 + "{" * 500
    body = (
        f'[[scenario]]\nname = "a{deep}"  # {deep}\nbehaviour = "keepalive"\n'
        f"description = '''\n{deep}\n'''\nduration_s = 1\n"
    )
    (perm,) = load_suite(write(tmp_path, f'contestants = ["node-http"]\n{body}')).permutations
    assert perm.scenario == f"a{deep}"


PUSH_SUITE = """name = "p"
contestants = ["node-http"]

[[scenario]]
name = "comet-short"
behaviour = "comet"
pacer = "users"
clients = 100
ramp_up_s = 1.5
duration_s = {duration}
emit_interval_ms = 1000
"""


def test_a_push_scenario_leaving_fewer_than_three_window_cycles_is_refused_at_its_line(
    tmp_path,
):
    path = write(tmp_path, PUSH_SUITE.format(duration=3))
    with pytest.raises(SuiteError, match=r"leaves 2 emit cycle\(s\).*at least 3") as caught:
        load_suite(path, known_contestants=KNOWN)
    assert str(caught.value).startswith(f"{path}:10:")
    # One more second of hold leaves three cycles between the ramp and the emitters' stop.
    path.write_text(PUSH_SUITE.format(duration=4))
    assert len(load_suite(path, known_contestants=KNOWN).permutations) == 1


def test_the_dry_run_refuses_a_push_scenario_without_three_window_cycles(tmp_path):
    path = write(tmp_path, PUSH_SUITE.format(duration=2))
    result = subprocess.run(
        [sys.executable, "-c", "from serverlab.cli import main; main()", "run", str(path)]
        + ["--dry-run"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert f"{path}:10: scenario 'comet-short': leaves 1 emit cycle(s)" in result.stderr
    assert "Traceback" not in result.stderr


CAPACITY_SUITE = """name = "c"
contestants = ["node-http"]

[[scenario]]
name = "knee"
kind = "capacity"
behaviour = "keepalive"
clients = 50
warmup_s = 4
start_rate = 2000
max_rate = 128000
step_s = 2
p99_bound_ms = 10
"""


@pytest.mark.parametrize(
    ("old", "new", "line", "reason"),
    [
        ('kind = "capacity"', 'kind = "ladder"', 6, "kind must be one of test, capacity"),
        ("start_rate = 2000", "start_rate = 0", 10, "start_rate must be positive"),
        ("max_rate = 128000", "max_rate = 1000", 11, "max_rate 1000 is below start_rate"),
        ("step_s = 2", "step_s = -1", 12, "step_s must be positive"),
        ("p99_bound_ms = 10", "", 6, "needs p99_bound_ms"),
        ("warmup_s = 4", "", 6, "a warmed server: give warmup_s"),
        ('behaviour = "keepalive"', 'behaviour = "syslog"', 7, "runs keepalive or new-connection"),
        (
            "clients = 50",
            "clients = 50\nmax_clients = 9",
            9,
            "max_clients applies to a push capacity",
        ),
        ("clients = 50", "clients = 50\nrate = 10", 9, "rate is set by the capacity search"),
        ("clients = 50", 'clients = 50\npacer = "closed"', 9, 'pacer = "open"'),
        ('kind = "capacity"', 'kind = "test"\nduration_s = 1', 11, "applies to kind = "),
        ("start_rate = 2000", "start_rate = [1, 2]", 10, "start_rate cannot be a list"),
    ],
)
def test_capacity_keys_are_checked_with_file_and_line(tmp_path, old, new, line, reason):
    path = write(tmp_path, CAPACITY_SUITE.replace(old, new))
    with pytest.raises(SuiteError) as err:
        load_suite(path, known_contestants=KNOWN)
    assert err.value.line == line and reason in err.value.reason, str(err.value)


PUSH_CAPACITY_SUITE = """name = "c"
contestants = ["node-http"]

[[scenario]]
name = "knee"
kind = "capacity"
behaviour = "websocket"
pacer = "users"
start_clients = 1000
max_clients = 16000
emit_interval_ms = 1000
ramp_up_s = 10
duration_s = 10
p99_bound_ms = 250
"""


@pytest.mark.parametrize(
    ("old", "new", "line", "reason"),
    [
        ('pacer = "users"', 'pacer = "open"', 8, 'ramps and holds its clients: pacer = "users"'),
        ("start_clients = 1000", "start_clients = 0", 9, "start_clients must be positive"),
        ("max_clients = 16000", "max_clients = 10", 10, "max_clients 10 is below start_clients"),
        ("emit_interval_ms = 1000", "", 6, "needs emit_interval_ms"),
        ("p99_bound_ms = 250", "", 6, "needs p99_bound_ms"),
        ("duration_s = 10", "", 6, "holds each step's clients: give duration_s"),
        ("ramp_up_s = 10", "ramp_up_s = 10\nclients = 5", 13, "clients is set by the capacity"),
        ("ramp_up_s = 10", "ramp_up_s = 10\nstep_s = 5", 13, "step_s applies to a request"),
        ("start_clients = 1000", "start_clients = 1000.5", 9, "start_clients must be"),
    ],
)
def test_push_capacity_keys_are_checked_with_file_and_line(tmp_path, old, new, line, reason):
    path = write(tmp_path, PUSH_CAPACITY_SUITE.replace(old, new))
    with pytest.raises(SuiteError) as err:
        load_suite(path, known_contestants=KNOWN)
    assert err.value.line == line and reason in err.value.reason, str(err.value)


def test_a_push_capacity_estimate_counts_the_worst_case_number_of_steps(tmp_path):
    suite = load_suite(write(tmp_path, PUSH_CAPACITY_SUITE), known_contestants=KNOWN)
    (perm,) = suite.permutations
    # 1k ... 16k clients is 5 levels; bisecting a factor of 2 to 5 % takes 5 more steps; each
    # step ramps 10 s and holds 10 s, with 1.5 s of settling and starting.
    assert perm.estimated_seconds() == pytest.approx(6.0 + 10 * (10 + 10 + 1.5))


def test_a_capacity_estimate_counts_the_worst_case_number_of_steps(tmp_path):
    suite = load_suite(write(tmp_path, CAPACITY_SUITE), known_contestants=KNOWN)
    (perm,) = suite.permutations
    # 2k ... 128k is 7 doublings; bisecting a factor of 2 to 5 % takes 5 more steps; each
    # step is its 2 s and 1.5 s of settling and starting.
    assert perm.estimated_seconds() == pytest.approx(6.0 + 4 + 12 * (2 + 1.5))
    half = load_suite(write(tmp_path, CAPACITY_SUITE), scale=0.5, known_contestants=KNOWN)
    assert half.permutations[0].params["step_s"] == 1
