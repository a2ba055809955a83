"""Distributed runs for real: a virtual lab of network namespaces with a `ray start` node in
each (a head, a server host, two generator hosts), its links delayed (the delay line, or
netem), the reference server on the server host, the real engine on the generators. What is
checked: merged figures equal what one histogram of every generator's samples says (by
Python's HdrHistogram, not the engine's merge), clocks, a generator lost mid-test, Ctrl-C,
nodes that run different engines, and that `lab down` leaves nothing.

Most tests share one lab (`lab`, made once: a lab up costs half a minute). The last two that
use it damage it, and run in file order: one kills a node, the next takes the lab down."""

import json
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest
from conftest import TESTS, write_manifest
from hdrh.histogram import HdrHistogram
from test_live import page_url, stream_until_end

from serverlab.base import owner, scratch
from serverlab.base.netns import existing
from serverlab.lab import manage
from serverlab.lab.topology import LabError
from serverlab.results.report import build_report
from serverlab.results.report.builder import report_data
from serverlab.results.report.flags.validity import validity_flags
from serverlab.results.store import Store
from serverlab.run.execution.engine import engine_binary
from serverlab.run.host import shapedlink
from serverlab.run.plan.live.feed import cycle_points, interval_point

# The tests share one virtual lab and run in file order: one pytest -n worker takes them all.
pytestmark = pytest.mark.xdist_group("lab")

SERVERLAB = str(Path(sys.executable).parent / "serverlab")
LAB = f"t{os.getpid() % 100000}"
# The shared lab's one-way delay between hosts: every run below crosses it.
LAB_DELAY_MS = 5


def netns_of(pid: int) -> int | None:
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino
    except OSError:
        return None


def namespace_inode(name: str) -> int:
    return os.stat(f"/var/run/netns/{name}").st_ino


@pytest.fixture(scope="module")
def lab_up():
    """The shared lab, made by `serverlab lab up` with its output piped; and that output."""
    made = subprocess.run(
        [SERVERLAB, "lab", "up", "--generators", "2", "--delay-ms", str(LAB_DELAY_MS)],
        capture_output=True,
        text=True,
        env={**os.environ, "SERVERLAB_LAB": LAB},
        timeout=600,
    )
    try:
        assert made.returncode == 0, made.stdout + made.stderr
        yield manage.read(LAB), made
    finally:
        manage.down(LAB)


@pytest.fixture(scope="module")
def lab(lab_up):
    return lab_up[0]


def test_lab_up_piped_tells_each_node_started_in_a_plain_line_with_the_time_left(lab_up):
    lab, made = lab_up
    nodes = len(lab.hosts)
    lines = [line for line in made.stderr.splitlines() if "Ray nodes" in line]
    assert len(lines) == nodes, made.stderr
    for done, (line, host) in enumerate(zip(lines, lab.hosts, strict=True), 1):
        found = re.fullmatch(
            rf"\[{done}/{nodes}\] starting the lab's Ray nodes: (.+) "
            r"\((\d+:\d\d) elapsed, ~(\d+:\d\d) left\)",
            line,
        )
        assert found, line
        assert found.group(1).split()[0] == host.role
    assert lines[-1].endswith("~0:00 left)"), "nothing is left after the last node"
    assert "\x1b[" not in made.stderr, "no bar drawn into a pipe"


def suite(tmp_path: Path, body: str, repeats: int = 1) -> Path:
    path = tmp_path / "suite.toml"
    path.write_text(f'name = "d"\nrepeats = {repeats}\ncontestants = ["reference"]\n{body}')
    return path


FAST = """
[[scenario]]
name = "fast{n}"
behaviour = "keepalive"
clients = 4
duration_s = {duration}
"""


def start_run(
    suite_path: Path, db: Path, contestants: Path, *extra: str, lab: str = LAB
) -> subprocess.Popen:
    env = {**os.environ, "SERVERLAB_LAB": lab, "SERVERLAB_CONTESTANTS": str(contestants)}
    return subprocess.Popen(
        [
            SERVERLAB,
            "run",
            str(suite_path),
            "--db",
            str(db),
            "--ray",
            "lab",
            "--skip-verify",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )


def finish(run: subprocess.Popen, timeout_s: float = 120) -> str:
    out, _ = run.communicate(timeout=timeout_s)
    return out


def stored(db: Path):
    with Store(db) as store:
        tests = [store.load_details(t) for t in store.tests()]
        runs = store.runs()
    return tests, runs


def made_by_a_live_owner(netns: str) -> bool:
    found = re.fullmatch(rf"{re.escape(shapedlink.PREFIX)}(\d+)-(\d+)-\d+", netns)
    return bool(found) and owner.alive(f"{found.group(1)}.{found.group(2)}")


def engines_in(namespace: str) -> list[psutil.Process]:
    inode = namespace_inode(namespace)
    found = []
    for process in psutil.process_iter(["cmdline"]):
        cmdline = " ".join(process.info["cmdline"] or [])
        if "serverlab-load" in cmdline and "--plan" in cmdline and netns_of(process.pid) == inode:
            found.append(process)
    return found


def wait_for(predicate, timeout_s: float = 60, what: str = "it"):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def decoded(encoded: str) -> HdrHistogram:
    return HdrHistogram.decode(encoded)


def at_quantile(histogram: HdrHistogram, quantile: float) -> int:
    """The value at `quantile` by the engine's rank rule (hdrhistogram-rs: the ceil(q * n)-th
    sample), which is not Python hdrh's (round half up): on one rank they differ, and this
    test is about merging, not about two libraries' rounding."""
    rank = max(1, math.ceil(quantile * histogram.get_total_count()))
    seen = 0
    for index in range(histogram.counts_len):
        seen += histogram.get_count_at_index(index)
        if seen >= rank:
            return histogram.get_highest_equivalent_value(histogram.get_value_from_index(index))
    raise AssertionError("an empty histogram")


def test_two_generators_merge_exactly_and_the_server_saw_the_total(lab, contestants_dir, tmp_path):
    db = tmp_path / "lab.db"
    out = finish(start_run(suite(tmp_path, FAST.format(n=1, duration=2)), db, contestants_dir))
    (test,), (run,) = stored(db)
    assert test.status == "ok", (out, test.validity)
    generators = test.run_info["generators"]
    assert len(generators) == 2
    assert {g["address"] for g in generators} == {h.address for h in lab.generators}
    summaries = [g["summary"] for g in generators]
    assert test.summary["requests"] == sum(s["requests"] for s in summaries)
    assert all(s["requests"] > 20 for s in summaries), "both generators loaded the server"
    # One histogram holding both generators' samples, added by Python's HdrHistogram.
    whole = decoded(summaries[0]["histogram"])
    whole.add(decoded(summaries[1]["histogram"]))
    for key, quantile in (("p50", 0.5), ("p99", 0.99)):
        assert test.summary["latency_us"][key] == at_quantile(whole, quantile)
    served = test.server_stats[-1].stats["requests"]["total"]
    assert served >= test.summary["requests"]
    for generator in generators:
        # One machine, one clock: the true offset is 0.
        assert abs(generator["offset_ms"]) <= generator["uncertainty_ms"]
    assert run.machine["placement"]["server"] == lab.server.address
    link = run.machine["placement"]["lab_link"]  # what delayed the lab, and the proof
    assert link["delay_by"] in ("netem", "delayline") and link["delay_ms"] == LAB_DELAY_MS
    assert abs(link["rtt_ms"] - 2 * LAB_DELAY_MS) <= 0.1 * 2 * LAB_DELAY_MS, link
    html = build_report(db, None, tmp_path / "r.html").read_text()
    for generator in lab.generators:
        assert generator.address in html, "a row per generator"
    assert "clock offset" in html


GROUPED = """
[[scenario]]
name = "grouped"
behaviour = "keepalive"
clients = 4
duration_s = 3

[[scenario.groups]]
name = "probe"
pacer = "open"
rate = 200
clients = 2
path = "/perf"

[[scenario.groups]]
name = "burst"
start_s = 1
stop_s = 2
"""


def test_two_generators_groups_merge_exactly_group_by_group(lab, contestants_dir, tmp_path):
    db = tmp_path / "lab.db"
    out = finish(start_run(suite(tmp_path, GROUPED), db, contestants_dir))
    (test,), _ = stored(db)
    assert test.status == "ok", (out, test.validity)
    generators = [g["summary"]["groups"] for g in test.run_info["generators"]]
    assert len(generators) == 2
    for name in ("probe", "burst"):
        merged, parts = test.summary["groups"][name], [g[name] for g in generators]
        assert all(part["answered"] > 20 for part in parts), "both generators ran the group"
        for count in ("requests", "answered", "connections_opened"):
            assert merged[count] == sum(part[count] for part in parts), (name, count)
        # One histogram holding both generators' samples of the group, added by Python.
        whole = decoded(parts[0]["histogram"])
        whole.add(decoded(parts[1]["histogram"]))
        for key, quantile in (("p50", 0.5), ("p99", 0.99)):
            assert merged["latency_us"][key] == at_quantile(whole, quantile), (name, key)
    # The probe's arrivals are the whole rate's, interleaved: 200/s for 3 s, not twice.
    assert test.summary["groups"]["probe"]["requests"] <= 601
    assert test.summary["groups"]["burst"]["window"] == {"start_s": 1.0, "stop_s": 2.0}
    # The report's clients are the whole plan's, not the one generator's part the merged
    # summary's plan is.
    rows = report_data(db)["client_groups"]
    assert [(r["group"], r["clients"]) for r in rows] == [
        ("probe", "2"),
        ("burst", "4"),
        ("all groups", "6"),
    ]


def test_a_generator_whose_engine_dies_makes_an_invalid_test_and_the_suite_goes_on(
    lab, contestants_dir, tmp_path
):
    db = tmp_path / "lab.db"
    body = FAST.format(n=1, duration=6) + FAST.format(n=2, duration=2)
    run = start_run(suite(tmp_path, body), db, contestants_dir)
    victim = wait_for(lambda: engines_in(lab.generators[1].netns), what="gen2's engine")[0]
    time.sleep(1.0)
    victim.send_signal(signal.SIGKILL)
    out = finish(run)
    assert run.returncode == 0, out
    (lost, after), _ = stored(db)
    assert lost.status == "invalid"
    (record,) = lost.validity["generator_lost"]
    assert record["address"] == lab.generators[1].address and record["after_s"] > 0
    assert after.status == "ok", after.validity


def test_clock_offsets_are_measured_and_applied(lab, contestants_dir, tmp_path):
    body = """
[[scenario]]
name = "skewed"
behaviour = "comet"
pacer = "users"
clients = 20
ramp_up_s = 0.5
duration_s = 3
emit_interval_ms = 200
[scenario.tunables.reference]
clock_skew_ms = 4000
"""
    db = tmp_path / "lab.db"
    out = finish(start_run(suite(tmp_path, body), db, contestants_dir))
    (test,), _ = stored(db)
    assert test.status == "ok", (out, test.validity)
    for generator in test.run_info["generators"]:
        assert abs(generator["offset_ms"] - 4000) <= generator["uncertainty_ms"]
    delay = test.summary["event_delay_us"]
    # Without the offset every delay would be some 4 s below zero; with it, they are true.
    assert delay["count"] > 0 and 0 <= delay["p50"] < 500_000


def test_ctrl_c_stops_every_engine_and_server_on_every_node(lab, contestants_dir, tmp_path):
    db = tmp_path / "lab.db"
    run = start_run(suite(tmp_path, FAST.format(n=1, duration=30)), db, contestants_dir)
    wait_for(lambda: engines_in(lab.generators[0].netns), what="an engine")
    before = set(existing())
    run.send_signal(signal.SIGINT)
    out = finish(run, timeout_s=60)
    assert run.returncode == 130, out

    def leftovers():
        names = ("serverlab-load", "reference_server.py")
        return [
            p.pid
            for p in psutil.process_iter(["cmdline"])
            if any(n in " ".join(p.info["cmdline"] or []) for n in names)
            and netns_of(p.pid) in {namespace_inode(h.netns) for h in lab.hosts}
        ]

    wait_for(lambda: not leftovers(), timeout_s=20, what="the run's processes to go")
    # Tests beside this one (pytest -n) may make shaped links of their own meanwhile: a new
    # namespace is left behind unless it is one whose maker is still alive.
    left = [netns for netns in set(existing()) - before if not made_by_a_live_owner(netns)]
    assert not left, "no namespace left behind"
    with Store(db) as store:
        assert [r.status for r in store.runs()] == ["interrupted"]


def test_nodes_with_different_engines_refuse_the_run_naming_the_node(contestants_dir, tmp_path):
    other = tmp_path / "other-engine"
    shutil.copy(engine_binary(), other)
    with open(other, "ab") as binary:
        binary.write(b"\0")  # runs the same, hashes otherwise
    name = f"v{os.getpid() % 100000}"
    made = manage.up(1, name=name, environment={"gen1": {"SERVERLAB_ENGINE": str(other)}})
    try:
        env = {**os.environ, "SERVERLAB_LAB": name, "SERVERLAB_CONTESTANTS": str(contestants_dir)}
        done = subprocess.run(
            [
                SERVERLAB,
                "run",
                str(suite(tmp_path, FAST.format(n=1, duration=1))),
                "--db",
                str(tmp_path / "lab.db"),
                "--ray",
                "lab",
                "--skip-verify",
            ],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
    finally:
        manage.down(name)
    assert done.returncode == 2, done.stdout + done.stderr
    assert made.generators[0].address in done.stderr and "engine binary" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def load_by_hand(lab, contestants_dir: Path, name: str, command_of) -> tuple:
    """Runs `command_of(server)` (a `serverlab load --ray lab` command line) against a
    server of contestant `name` started by hand on the lab's server host; returns what the
    command did and how many requests the server saw."""
    from serverlab.base.netns import Namespace
    from serverlab.contestant.manifest import find
    from serverlab.run.host.shapedlink import NamespacedServer

    os.environ["SERVERLAB_CONTESTANTS"] = str(contestants_dir)
    server = NamespacedServer(Namespace(lab.server.netns), find(name), host=lab.server.address)
    try:
        server.start()
        done = subprocess.run(
            command_of(server),
            capture_output=True,
            text=True,
            env={**os.environ, "SERVERLAB_LAB": LAB},
            timeout=120,
        )
        served = server.stats()["requests"]["total"]
    finally:
        server.stop()
        server.cleanup()
        os.environ.pop("SERVERLAB_CONTESTANTS")
    return done, served


def test_ad_hoc_load_from_two_generators_is_merged_and_printed(lab, contestants_dir, tmp_path):
    """`serverlab load URL --ray lab`: a server started by hand on the lab's server host."""

    def command(server) -> list[str]:
        url = f"http://{lab.server.address}:{server.port}/perf"
        return [SERVERLAB, "load", "--ray", "lab", url, "-c", "4", "-d", "2s", "--json"]

    done, served = load_by_hand(lab, contestants_dir, "reference", command)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["type"] == "summary" and summary["generators"] == 2
    assert summary["requests"] > 20 and served >= summary["requests"]


# Run in a mount namespace of its own: a tmpfs on $1 that only it sees, the CA $2 copied
# there as ca.pem, then the command that follows.
DRIVER_ONLY = 'mount -t tmpfs -o size=1m none "$1" && cp "$2" "$1/ca.pem" && shift 2 && exec "$@"'


def test_a_remote_generator_trusts_the_ca_pem_sent_with_its_plan_not_a_path_on_its_host(
    lab, contestants_dir, tmp_path
):
    """`serverlab load https://... --tls-ca FILE --ray lab`, FILE on a tmpfs mounted in the
    driver's own mount namespace: no generator can open that path (the lab's hosts share
    one file system otherwise), so the load is whole only if the CA's PEM went with the
    plan; and the certificate must name the server's lab address, which they connect to."""
    from test_tls import TLS_MANIFEST

    from serverlab.cluster.actors import CA_COPY

    write_manifest(contestants_dir, "reference-tls", TLS_MANIFEST)
    driver_only = tmp_path / "driver-only"
    driver_only.mkdir()

    def command(server) -> list[str]:
        url = f"https://{lab.server.address}:{server.tls_port}/perf"
        load = [SERVERLAB, "load", "--ray", "lab", url, "-c", "4", "-d", "1s", "--json"]
        load += ["--tls-ca", str(driver_only / "ca.pem")]
        unshare = ["unshare", "--mount", "--propagation", "private", "sh", "-c", DRIVER_ONLY]
        return [*unshare, "sh", str(driver_only), str(server.tls.ca_cert), *load]

    done, served = load_by_hand(lab, contestants_dir, "reference-tls", command)
    assert not (driver_only / "ca.pem").exists(), "the CA file was seen outside the driver"
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.splitlines()[-1])
    assert summary["generators"] == 2 and summary["tls_handshakes"] >= 4
    assert summary["requests"] > 20 and served >= summary["requests"]
    assert not any(summary["errors"].values()), summary["errors"]
    assert not list(scratch.root().rglob(CA_COPY)), "a generator's CA copy outlived its load"


# --- the lab leaves nothing --------------------------------------------------------------


def leftover_folders() -> set[Path]:
    """Temporary folders a lab run makes: under the owned root (not this test's own, not a
    lab's), and the loose ones runs made before there was a root."""
    loose = Path(tempfile.gettempdir())
    found = {*loose.glob("serverlab-generator-*"), *loose.glob("serverlab-server-*")}
    root = scratch.root()
    if root.is_dir():
        found |= {
            p
            for p in root.iterdir()
            if not p.name.startswith(scratch.LAB_PREFIX)
            and p.name != owner.token()
            and not another_command(p.name)
        }
    return found


def another_command(mark: str) -> bool:
    """A live owner in this test's own network namespace is another serverlab command on the
    machine (a developer's verify beside the tests), not something the lab run left behind;
    the lab's Ray workers live in the lab's namespaces, so their folders still count."""
    if not owner.alive(mark):
        return False
    pid = mark.partition(".")[0]
    try:
        return os.stat(f"/proc/{pid}/ns/net").st_ino == os.stat("/proc/self/ns/net").st_ino
    except OSError:
        return False


FLOOD = """
[[scenario]]
name = "flood"
behaviour = "syslog"
clients = 2
syslog_messages = 100_000
syslog_transport = "tcp"
syslog_framing = "newline"
"""


def test_a_flood_from_two_generators_counts_each_sender_and_says_capacity(
    lab, contestants_dir, tmp_path
):
    """Seed 002's large floods under --ray: one connection per generator, numbered in
    ranges of their own, the loss exact against every sender's count; a generator above
    90 % CPU over its flood flags that test's figures, naming it."""
    db = tmp_path / "lab.db"
    path = tmp_path / "suite.toml"
    path.write_text('name = "seed-002-flood"\ncontestants = ["reference"]\n' + FLOOD)
    out = finish(start_run(path, db, contestants_dir))
    (flood,), _ = stored(db)
    assert flood.status == "ok", (out, flood.validity)
    figures = flood.summary["syslog"]
    assert (figures["sent"], figures["received"], figures["lost"]) == (100_000, 100_000, 0)
    senders = sorted(figures["senders"], key=lambda s: s["seq_first"])
    assert [(s["seq_first"], s["sent"]) for s in senders] == [(1, 50_000), (50_001, 50_000)]
    assert {s["address"] for s in senders} == {h.address for h in lab.generators}
    # Each generator's CPU over its own sending: the flag is the flood's, on its cells.
    bound = [g["address"] for g in flood.run_info["generators"] if g["cpu_percent"] > 90]
    flags = [f.text for f in validity_flags(flood) if f.code == "generator-bound"]
    assert bool(flags) == bool(bound) and all(a in flags[0] for a in bound), (flags, bound)
    html = build_report(db, None, tmp_path / "r.html").read_text()
    section = html[html.index('id="seed-002"') :]
    assert "capacity figures, not speed figures" in section[: section.index("</section>")]


GRPC_SUBSCRIBE = """
[[scenario]]
name = "grpc-subscribe"
behaviour = "grpc-stream"
pacer = "users"
clients = 4
ramp_up_s = 0.5
duration_s = 3
emit_interval_ms = 100
transport = "h2c"
"""


def test_grpc_subscribe_streams_from_two_generators_merge_exactly(lab, contestants_dir, tmp_path):
    """A grpc-stream test against go-nethttp's grpc-go server split over the lab's two
    generators (issue 36): the merged counts are the sums of each generator's, and its
    delivery delays the percentiles of one histogram of every generator's samples (Python's
    HdrHistogram, not the engine's merge)."""
    (contestants_dir / "go-nethttp").symlink_to(TESTS.parent / "contestants" / "go-nethttp")
    db = tmp_path / "lab.db"
    path = tmp_path / "suite.toml"
    path.write_text('name = "g"\ncontestants = ["go-nethttp"]\n' + GRPC_SUBSCRIBE)
    out = finish(start_run(path, db, contestants_dir))
    (test,), _ = stored(db)
    assert test.status == "ok", (out, test.validity)
    summaries = [g["summary"] for g in test.run_info["generators"]]
    assert len(summaries) == 2
    assert all(s["events"]["received"] > 10 for s in summaries), "both generators subscribed"
    for count in ("received", "lost", "duplicated", "reconnects"):
        assert test.summary["events"][count] == sum(s["events"][count] for s in summaries)
    assert test.summary["errors"] == {
        kind: sum(s["errors"][kind] for s in summaries) for kind in test.summary["errors"]
    }
    whole = decoded(summaries[0]["event_delay_histogram"])
    whole.add(decoded(summaries[1]["event_delay_histogram"]))
    for key, quantile in (("p50", 0.5), ("p99", 0.99)):
        assert test.summary["event_delay_us"][key] == at_quantile(whole, quantile)
    assert test.server_stats[-1].stats["grpc"]["calls"] >= 4


def test_a_lab_run_leaves_no_temporary_folder(lab, contestants_dir, tmp_path):
    before = leftover_folders()
    db = tmp_path / "lab.db"
    out = finish(start_run(suite(tmp_path, FAST.format(n=1, duration=1)), db, contestants_dir))
    (test,), _ = stored(db)
    assert test.status == "ok", out
    assert leftover_folders() - before == set()


def test_the_live_page_of_a_ray_run_shows_its_merged_figures(lab, contestants_dir, tmp_path):
    """Spread, a test's lines come back merged at its end: the page gets exactly the merged
    interval lines, emit cycles and server samples the database keeps, each once."""
    body = """
[[scenario]]
name = "comet"
behaviour = "comet"
pacer = "users"
clients = 8
ramp_up_s = 0.5
duration_s = 3
emit_interval_ms = 500
"""
    db = tmp_path / "lab.db"
    run = start_run(suite(tmp_path, body), db, contestants_dir, "--live")
    events = stream_until_end(page_url(run, r"live page: (\S+)"))
    out = finish(run)
    assert run.returncode == 0, out
    (test,), _ = stored(db)
    assert test.status == "ok", (out, test.validity)
    assert len(test.run_info["generators"]) == 2
    assert [e["id"] for e in events] == list(range(1, len(events) + 1))
    (finished,) = [e for e in events if e["kind"] == "finished"]
    assert not [e for e in events if e["kind"] == "interval"], "none came as it ran"
    merged = [interval_point(i.data) for i in test.intervals]
    assert finished["intervals"] == json.loads(json.dumps(merged)) and len(merged) >= 2
    assert sum(p["events"] for p in merged) > 0
    assert finished["cycles"] == cycle_points(test) and len(finished["cycles"]) >= 2
    # The merged cycles count both generators' deliveries: all 8 clients'.
    assert max(c["completeness"] for c in finished["cycles"]) == 100
    assert [e["kind"] for e in events].count("sample") >= 2, "the server host's samples"


def test_a_lost_ray_node_makes_an_invalid_test_and_the_suite_goes_on(
    lab, contestants_dir, tmp_path
):
    """The shared lab, last but one: it kills one of its nodes, which only the next test
    (lab down) uses after it."""
    db = tmp_path / "lab.db"
    body = FAST.format(n=1, duration=6) + FAST.format(n=2, duration=2)
    run = start_run(suite(tmp_path, body), db, contestants_dir)
    gen2 = lab.generators[1]
    wait_for(lambda: engines_in(gen2.netns), what="gen2's engine")
    inode = namespace_inode(gen2.netns)
    for process in psutil.process_iter(["cmdline"]):
        if netns_of(process.pid) == inode and owner.mark_of(process.pid):
            process.send_signal(signal.SIGKILL)  # the whole node: raylet, workers, engine
    out = finish(run)
    assert run.returncode == 0, out
    # Ray's message on the lost node, without the raylet's state dump (some 45 lines). Which
    # message Ray prints is a race: the raylet's own death notice (which carries the dump) or
    # the head's missed heartbeats (which does not); tests/test_ray_messages.py cuts a
    # recorded death notice every time.
    lost = ("Raylet is terminated", "has been marked dead")
    assert any(said in out for said in lost) and "[state-dump]" not in out, out
    (lost, after), _ = stored(db)
    assert lost.status == "invalid" and lost.validity["generator_lost"]
    assert after.status == "ok", after.validity
    assert len(after.run_info["generators"]) == 1, "the suite went on with the generator left"


def running(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def test_lab_down_returns_only_when_every_process_of_every_node_is_gone(lab):
    """The shared lab, last: after every run above (and a node killed), its Ray nodes, their
    agents and workers, and its links' delay lines are all gone when `lab down` returns."""
    inodes = {namespace_inode(name) for name in lab.namespaces()}
    session = str(scratch.lab_folder(lab.name))

    def of_the_lab() -> dict[int, str]:
        found = {}
        for process in psutil.process_iter(["cmdline"]):
            cmdline = " ".join(process.info["cmdline"] or [])
            if netns_of(process.pid) in inodes or session in cmdline:
                found[process.pid] = cmdline
        return found

    before = of_the_lab()
    try:
        # Ray's agents are the ones that used to outlive `lab down` by a minute.
        assert any("agent" in cmdline for cmdline in before.values()), before
        if manage.link(lab.name).get("delay_by") == "delayline":
            assert any("serverlab-delayline" in cmdline for cmdline in before.values())
    finally:
        manage.down(lab.name)
    assert {pid: cmd for pid, cmd in before.items() if running(pid)} == {}
    assert {pid for pid in of_the_lab() if running(pid)} == set()


def test_lab_up_refuses_while_a_previous_labs_process_is_alive_naming_it():
    name = f"p{os.getpid() % 100000}"
    # A process of a lab that is not up, deaf to SIGTERM: a Ray agent left behind.
    stray = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)",
            str(scratch.lab_folder(name) / "head" / "session_latest"),
        ]
    )
    try:
        with pytest.raises(LabError) as refused:
            manage.up(1, name=name)
        assert f"pid {stray.pid} (" in str(refused.value)
        assert "time.sleep(120)" in str(refused.value)
        assert not [n for n in existing() if n.startswith(f"serverlab-lab-{name}-")]
    finally:
        stray.kill()
        stray.wait()
        manage.down(name)
