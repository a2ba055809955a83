import json
import os

from serverlab.run.machine import Pinning, describe, read_sysctl


def test_default_pinning_keeps_engine_and_server_apart_on_two_cores():
    pinning = Pinning.default()
    if len(os.sched_getaffinity(0)) >= 2:
        assert not pinning.shared
        assert pinning.engine == "0"
    assert Pinning("1", "0").shared is False
    assert Pinning("0,1", "1").shared is True


def test_description_is_json_and_reads_the_real_machine():
    info = describe(Pinning("1", "0"))
    json.dumps(info)
    assert info["cpus"] == os.cpu_count()
    assert info["kernel"] == os.uname().release
    assert info["tools"]["python"].startswith("Python 3")
    assert info["sysctls"]["net.core.somaxconn"] == read_sysctl("net.core.somaxconn")
    assert int(info["sysctls"]["net.core.somaxconn"]) > 0
    assert info["rlimit_nofile"]["soft"] <= info["rlimit_nofile"]["hard"]
    assert read_sysctl("no.such.knob") is None


def test_a_server_given_more_cpus_than_its_share_takes_the_engines_and_says_so():
    pinning = Pinning(server="1", engine="0")
    assert pinning.with_server_cpus(None) == pinning
    assert pinning.with_server_cpus(1) == Pinning(server="1", engine="0")
    wider = pinning.with_server_cpus(2)
    assert wider.server == "1,0" and wider.shared
    assert not Pinning(server="2,3", engine="0,1").with_server_cpus(2).shared
