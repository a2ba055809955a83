"""Seed 000's scenario 2 in the report, from real short runs: the reference server behind a
shaped link with a delay, its figures and time series in the seed's section, and the flag of
a link whose delay could not be applied on that contestant's cells only."""

import json
import re

from conftest import REFERENCE_MANIFEST, write_manifest

from serverlab.base import delayline
from serverlab.contestant.manifest import find
from serverlab.results.report import build_report
from serverlab.results.store import Store
from serverlab.run.execution.executor import Environment
from serverlab.run.host.machine import Pinning
from serverlab.run.plan.planner import plan_tests
from serverlab.run.plan.runner import Session, run_suite
from serverlab.run.plan.suite.load import load_suite

DELAY_MS = 20
SUITE = """name = "seed-000-slow"
seed = "000"
repeats = 1
contestants = ["{contestant}"]

[links.slow]
rate_mbit = 10
delay_ms = {delay}

[filesets.few]
seed = 0
count = 2
min_bytes = 200000
max_bytes = 200000

[[scenario]]
name = "slow-link-downloads"
behaviour = "keepalive"
clients = 4
duration_s = 3
files = "few"
link = "slow"
"""


def _run(tmp_path, db, contestant: str) -> None:
    path = tmp_path / f"{contestant}.toml"
    path.write_text(SUITE.format(contestant=contestant, delay=DELAY_MS))
    suite = load_suite(path)
    with Store(db) as store:
        env = Environment(manifest_of=find, pinning=Pinning.default(), workdir=db.parent / "work")
        run_suite(Session(suite, plan_tests(suite, find), store, env))


def _cells(html: str, anchor: str) -> dict[str, dict[str, tuple[str, str]]]:
    """contestant -> metric -> (median text, flag codes), from the block's table."""
    block = html[html.index(f'id="{anchor}"') :]
    table = block[: block.index("</table>")]
    found = {}
    for row in re.findall(r"<tr><td><span class=\"name\">(.*?)</tr>", table, re.S):
        name = row[: row.index("<")]
        cells = re.findall(r'data-metric="(\w+)" data-n="\d+" data-flags="([^"]*)"><b>([^<]*)', row)
        found[name] = {metric: (median, flags) for metric, flags, median in cells}
    return found


def _figure(html: str, key: str) -> dict:
    data = re.search(r'<script type="application/json" id="figure-data">(.*?)</script>', html, re.S)
    return json.loads(data.group(1))[key]


def test_scenario_2_shows_the_servers_side_and_the_flag_only_where_the_delay_was_missing(
    contestants_dir, tmp_path, monkeypatch
):
    assert delayline.binary() is not None, "the delay line is built (make build)"
    db = tmp_path / "lab.db"
    _run(tmp_path, db, "reference")
    # The same server under another name, on a machine with no way to delay: no netem (this
    # kernel has none) and no delay line.
    write_manifest(
        contestants_dir, "nodelay", REFERENCE_MANIFEST.replace('"reference"', '"nodelay"')
    )
    monkeypatch.setenv(delayline.DELAYLINE_ENV, str(tmp_path / "no-such-delayline"))
    _run(tmp_path, db, "nodelay")
    html = build_report(db, ["all"], tmp_path / "r.html").read_text()

    cells = _cells(html, "seed-000-slow1")
    delayed, flat = cells["reference"], cells["nodelay"]
    assert abs(float(delayed["link_rtt"][0]) - 2 * DELAY_MS) <= 0.1 * 2 * DELAY_MS, delayed
    assert 5 <= float(delayed["goodput"][0]) <= 11, delayed  # 10 Mbit/s, headers included
    assert float(delayed["held"][0]) == 4, "each client's connection, held by the server"
    assert float(delayed["rss"][0]) > 0 and float(delayed["sockpeak"][0]) > 0
    assert all("link-delay-unavailable" not in flags for _, flags in delayed.values())
    assert all("link-delay-unavailable" in flags for _, flags in flat.values())
    assert "link_delay_unavailable: fired on 1 of 2 tests (nodelay r1)" in html
    # The monitor samples 10 times a second over the whole test; the engine, once a second.
    for series, points in (("fds", 20), ("rss", 20), ("cpu", 20), ("goodput", 2)):
        traces = _figure(html, f"seed-000-slow1-{series}")["data"]
        assert {t["name"] for t in traces} == {"reference", "nodelay"}
        assert all(len(t["y"]) >= points for t in traces), series
