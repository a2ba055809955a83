import re

import pytest
from conftest import write_manifest

from serverlab.contestant.manifest import (
    BrokenManifest,
    Manifest,
    ManifestError,
    UnknownContestantError,
    discover,
    find,
    load_manifest,
)

GOOD = """
name = "demo"
language = "python"
architecture = "event loop"
implements = ["perf", "control", "syslog"]
version = "python3 --version"
build = "true"
artifacts = ["out.bin"]
start = "server --port {port} --syslog {syslog_port} --threads {threads} -r {docroot} -H {host}"
ready = "/stats"
ready_timeout_s = 12

[tunables.threads]
default = 8
type = "int"
min = 1
help = "worker threads"
"""


def good_with(**changes) -> str:
    """GOOD with top-level keys replaced (None removes the key)."""
    lines = GOOD.strip().splitlines()
    out = []
    for line in lines:
        key = line.split("=")[0].strip()
        if key in changes:
            if changes[key] is not None:
                out.append(f"{key} = {changes.pop(key)}")
            else:
                changes.pop(key)
            continue
        out.append(line)
    out[4:4] = [f"{key} = {value}" for key, value in changes.items()]
    return "\n".join(out) + "\n"


def load(tmp_path, text, folder="demo") -> Manifest:
    return load_manifest(write_manifest(tmp_path, folder, text))


def test_a_good_manifest_is_read_whole(tmp_path):
    manifest = load(tmp_path, GOOD)
    assert manifest.name == "demo"
    assert manifest.implements == ("perf", "control", "syslog")
    assert manifest.tunables["threads"].default == "8"
    assert manifest.ready_timeout_s == 12.0
    assert manifest.parts() == ["http", "perf", "control", "syslog"]
    assert manifest.speaks_http and manifest.uses_syslog_port
    assert not manifest.is_built()
    (manifest.folder / "out.bin").write_text("x")
    assert manifest.is_built()


def test_defaults_for_optional_keys(tmp_path):
    manifest = load(tmp_path, good_with(ready=None, ready_timeout_s=None, build=None))
    assert manifest.ready == "tcp"
    assert manifest.ready_timeout_s == 30.0
    assert manifest.build == ""


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        ({"colour": '"red"'}, "colour", "unknown key"),
        ({"start": None}, "start", "missing required key"),
        ({"version": None}, "version", "missing required key"),
        ({"implements": None}, "implements", "missing required key"),
        ({"name": '"other"'}, "name", "differs from its folder"),
        ({"implements": '["perf", "gopher"]'}, "implements", "unknown spec part 'gopher'"),
        ({"implements": "[]"}, "implements", "names no spec part"),
        ({"implements": '["push"]'}, "implements", "'push' requires 'control'"),
        ({"implements": '["control", "sse"]'}, "implements", "'sse' requires 'push'"),
        ({"implements": '["websocket"]'}, "implements", "'websocket' requires 'control'"),
        ({"implements": '["perf", 3]'}, "implements", "list of strings"),
        ({"language": "3"}, "language", "expected a string"),
        (
            {"start": '"srv --port {port} {syslog_port} {nope}"'},
            "start",
            "unknown placeholder {nope}",
        ),
        ({"version": '"v {port"'}, "version", "bad braces"),
        ({"start": '"srv --syslog {syslog_port}"'}, "start", "must use {port}"),
        ({"start": '"srv --port {port}"'}, "start", "does not use {syslog_port}"),
        ({"ready": '"stats"'}, "ready", "starting with '/'"),
        ({"ready_timeout_s": "0"}, "ready_timeout_s", "positive"),
    ],
)
def test_each_validation_error_names_file_and_key(tmp_path, changes, key, message):
    with pytest.raises(ManifestError) as error:
        load(tmp_path, good_with(**changes))
    text = str(error.value)
    assert "demo/contestant.toml" in text
    assert f"key '{key}'" in text
    assert message in text


T = "[tunables.t]\n"


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ('[tunables.threads]\nhelp = "x"', "tunables.threads.default", "missing required key"),
        ('[tunables.threads]\ndefault = "1"\nmost = 1', "tunables.threads.most", "unknown key"),
        ('[tunables.threads]\ndefault = "1"', "tunables.threads.type", "missing required key"),
        (T + 'default = true\ntype = "int"', "tunables.t.default", "string or a number"),
        (T + 'default = "1"\ntype = "float"', "tunables.t.type", "one of int, number"),
        (T + 'default = "a"\ntype = "word"', "tunables.t.words", "lists its words"),
        (T + 'default = "1"\ntype = "word"\nwords = [1]', "tunables.t.words", "list"),
        (T + 'default = "c"\ntype = "word"\nwords = ["a"]', "tunables.t.default", "one of a"),
        (T + 'default = "x"\ntype = "path"\nwords = ["a"]', "tunables.t.words", "no words"),
        (T + 'default = "a"\ntype = "word"\nwords = ["a"]\nmin = 1', "tunables.t.min", "no bounds"),
        (T + 'default = "0"\ntype = "int"\nmin = 1', "tunables.t.default", "in 1.."),
        (T + 'default = "1"\ntype = "int"\nmax = "x"', "tunables.t.max", "a number"),
        (T + 'default = "1K"\ntype = "size"\nwrite = "mb"', "tunables.t.write", "jvm"),
        (T + 'default = "1"\ntype = "int"\nwrite = "jvm"', "tunables.t.write", "size"),
        ('[tunables.Threads]\ndefault = "1"', "tunables.Threads", "lower-case"),
        ('[tunables.port]\ndefault = "1"', "tunables.port", "built-in placeholder"),
        ('[tunables]\nthreads = "1"', "tunables.threads", "expected a table"),
    ],
)
def test_bad_tunable_tables_are_refused(tmp_path, table, key, message):
    text = GOOD.split("[tunables.threads]")[0].replace(" --threads {threads}", "") + table
    with pytest.raises(ManifestError, match=message) as error:
        load(tmp_path, text)
    assert f"key '{key}'" in str(error.value)


def test_framing_limits_name_a_case_and_give_a_reason(tmp_path):
    base = GOOD.split("[tunables.threads]")[0].replace(" --threads {threads}", "")
    table = '[framing_limits]\n"http.framing_chunk_ext_ctl" = "the parser skips extensions"\n'
    manifest = load(tmp_path, base + table)
    assert manifest.framing_limits == {"http.framing_chunk_ext_ctl": "the parser skips extensions"}
    assert load(tmp_path, GOOD).framing_limits == {}
    for bad, message in [
        ('"chunk ext" = "why"', "a case id"),
        ('"http.framing_x" = ""', "the reason"),
        ('"http.framing_x" = 3', "the reason"),
    ]:
        with pytest.raises(ManifestError, match=message):
            load(tmp_path, base + "[framing_limits]\n" + bad + "\n")


def test_syslog_only_server_needs_a_count_command(tmp_path):
    text = good_with(implements='["syslog"]', start='"rsyslogd -p {syslog_port} -a {host}"')
    text = text.replace(" --threads {threads}", "")
    with pytest.raises(ManifestError, match="syslog_count"):
        load(tmp_path, text)
    manifest = load(tmp_path, 'syslog_count = "cat {workdir}/count"\n' + text)
    assert manifest.parts() == ["syslog"] and not manifest.speaks_http


MODE = '\n[tunables.syslog_mode]\ntype = "word"\nwords = {words}\ndefault = "{default}"\n'


@pytest.mark.parametrize(
    ("start", "table", "reason"),
    [
        ("", "", "does not pass {syslog_mode}"),
        (" -m {syslog_mode}", MODE.format(words='["count", "all"]', default="count"), "words"),
        (" -m {syslog_mode}", MODE.format(words='["count", "parse"]', default="parse"), "default"),
    ],
)
def test_syslog_parse_needs_its_mode_as_a_start_argument(tmp_path, start, table, reason):
    text = GOOD.replace(
        '"perf", "control", "syslog"', '"perf", "control", "syslog", "syslog-parse"'
    )
    text = text.replace(" -H {host}", " -H {host}" + start) + table
    with pytest.raises(ManifestError, match=re.escape(reason)):
        load(tmp_path, text)
    good = MODE.format(words='["count", "parse"]', default="count")
    fixed = GOOD.replace(
        '"perf", "control", "syslog"', '"perf", "control", "syslog", "syslog-parse"'
    )
    manifest = load(tmp_path, fixed.replace(" -H {host}", " -H {host} -m {syslog_mode}") + good)
    assert manifest.parts()[-1] == "syslog-parse"


def test_unreadable_toml_is_a_manifest_error(tmp_path):
    with pytest.raises(ManifestError, match="cannot read"):
        load(tmp_path, "name = ")


def test_a_broken_manifest_does_not_hide_the_good_ones(tmp_path):
    write_manifest(tmp_path, "demo", GOOD)
    write_manifest(tmp_path, "broken", "x = 1\n" + GOOD.replace('"demo"', '"broken"'))
    entries = discover(tmp_path)
    assert [entry.name for entry in entries] == ["broken", "demo"]
    assert isinstance(entries[0], BrokenManifest) and "unknown key" in entries[0].error
    assert isinstance(entries[1], Manifest)
    assert find("demo", tmp_path).name == "demo"
    with pytest.raises(ManifestError, match="key 'x': unknown key"):
        find("broken", tmp_path)


def test_an_unknown_name_lists_the_known_ones(tmp_path):
    write_manifest(tmp_path, "demo", GOOD)
    with pytest.raises(UnknownContestantError, match=r"'nope' \(known: demo\)"):
        find("nope", tmp_path)


def test_the_contestants_root_comes_from_the_environment(tmp_path, monkeypatch):
    write_manifest(tmp_path, "demo", GOOD)
    monkeypatch.setenv("SERVERLAB_CONTESTANTS", str(tmp_path))
    assert [entry.name for entry in discover()] == ["demo"]


def test_a_start_command_must_say_how_to_listen_on_another_address(tmp_path):
    text = good_with(start='"server --port {port} --syslog {syslog_port} --root {docroot}"')
    with pytest.raises(ManifestError, match=r"key 'start': does not use \{host\}"):
        load(tmp_path, text)


GRPC_START = '"server --port {port} --syslog {syslog_port} --threads {threads} -H {host} '
GRPC_PARTS = '["perf", "control", "push", "syslog", "grpc"'


@pytest.mark.parametrize(
    ("changes", "key", "message"),
    [
        ({"implements": GRPC_PARTS + "]"}, "implements", "'grpc' requires 'h2c', or grpc_listener"),
        (
            {"implements": GRPC_PARTS + "]", "grpc_listener": '"own"'},
            "start",
            "does not use {grpc_port}",
        ),
        (
            {
                "implements": GRPC_PARTS + ', "tls"]',
                "grpc_listener": '"own"',
                "start": GRPC_START + '--grpc {grpc_port} --tls {tls_port} {tls_cert} {tls_key}"',
            },
            "start",
            "does not use {grpc_tls_port}",
        ),
        (
            {
                "implements": GRPC_PARTS + ', "h2c"]',
                "start": GRPC_START + '--h2c {h2c_port} --grpc {grpc_port}"',
            },
            "start",
            'uses {grpc_port}, which only a grpc_listener = "own" server gets',
        ),
        ({"grpc_listener": '"own"'}, "grpc_listener", "'grpc' is not implemented"),
        (
            {"implements": GRPC_PARTS + "]", "grpc_listener": '"beside"'},
            "grpc_listener",
            "expected one of shared, own, got 'beside'",
        ),
    ],
)
def test_a_grpc_servers_listener_is_its_h2c_port_or_its_own_and_every_port_is_used(
    tmp_path, changes, key, message
):
    with pytest.raises(ManifestError, match=f"key '{key}': .*{re.escape(message)}"):
        load(tmp_path, good_with(**changes))


def test_a_grpc_server_on_its_own_listener_needs_no_h2c_and_gets_its_own_ports(tmp_path):
    text = good_with(
        implements=GRPC_PARTS + ', "tls"]',
        grpc_listener='"own"',
        start=GRPC_START
        + '--grpc {grpc_port} {grpc_tls_port} --tls {tls_port} {tls_cert} {tls_key}"',
    )
    manifest = load(tmp_path, text)
    assert manifest.grpc_own_ports() == ("grpc_port", "grpc_tls_port")
    assert {"grpc_port", "grpc_tls_port"} <= manifest.placeholder_names()


@pytest.mark.parametrize(
    ("table", "key", "message"),
    [
        ('{ nope = "why" }', "not_claimed.nope", "unknown spec part"),
        ('{ syslog = "why" }', "not_claimed.syslog", "cannot be both claimed and not"),
        ('{ grpc = " " }', "not_claimed.grpc", "expected the reason"),
    ],
)
def test_a_part_not_claimed_is_a_known_unclaimed_part_with_its_reason(
    tmp_path, table, key, message
):
    with pytest.raises(ManifestError, match=f"key '{key}': .*{re.escape(message)}"):
        load(tmp_path, good_with(not_claimed=table))


def test_every_contestant_claims_grpc_or_says_why_not():
    """Issue 36: each contestant that does not serve gRPC says why in its manifest."""
    silent = [
        entry.name
        for entry in discover()
        if isinstance(entry, Manifest)
        and "grpc" not in entry.implements
        and "grpc" not in entry.not_claimed
    ]
    assert not silent
