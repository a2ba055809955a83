import json
import os

from serverlab.run.host.machine import Pinning, describe, read_sysctl


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


def test_the_fingerprint_names_the_hardware_and_kernel_and_no_software():
    from serverlab.run.host.machine import cpu_model, fingerprint

    print_ = fingerprint()
    assert print_["cpus"] == os.cpu_count()
    assert print_["kernel"] == os.uname().release
    assert print_["cpu_model"] == cpu_model()
    assert print_["memory_gib"] >= 1
    assert set(print_) == {"cpu_model", "cpus", "kernel", "memory_gib", "governor"}


def test_versions_name_the_engine_build_beside_the_fingerprint(tmp_path):
    from serverlab.run.host.machine import software_versions

    engine = tmp_path / "serverlab-load"
    engine.write_text("#!/bin/sh\necho serverlab-load 9.9\n")
    engine.chmod(0o755)
    versions = software_versions(engine, {"node-http": "v20"}, {"node": "v20", "go": None})
    assert versions["engine"].startswith("serverlab-load 9.9 (sha256 ")
    assert versions["contestants"] == {"node-http": "v20"}
    assert versions["tools"] == {"node": "v20"}
    engine.write_text("#!/bin/sh\necho serverlab-load 9.9\n# another build\n")
    assert software_versions(engine, {}, {})["engine"] != versions["engine"]
