import subprocess

import pytest

from serverlab.contestant.placeholders import (
    PlaceholderError,
    check_placeholders,
    placeholders_in,
    render_command,
)


def test_placeholders_are_listed_in_order():
    assert placeholders_in("run --port {port} --dir {workdir} {port}") == [
        "port",
        "workdir",
        "port",
    ]


def test_render_fills_every_placeholder():
    assert render_command("x {port} {name}", {"port": "8080", "name": "n"}) == "x 8080 n"


def test_doubled_braces_are_literal_braces_for_the_shell():
    assert render_command("echo ${{HOME}} {port}", {"port": "1"}) == "echo ${HOME} 1"


HOSTILE = ["/tmp/a b/c", "it's", 'say "hi"', "$(touch M)", "`touch M`", "a;b|c&d", "*", "~", ""]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_reaches_the_argv_verbatim_and_never_runs(tmp_path, value):
    command = render_command("printf '%s\\0' {value}; printf done", {"value": value})
    done = subprocess.run(["/bin/sh", "-c", command], cwd=tmp_path, capture_output=True)
    assert done.stdout == value.encode() + b"\0done"
    assert list(tmp_path.iterdir()) == []  # no M, nothing globbed or created


@pytest.mark.parametrize(
    "template",
    ["run '{port}'", 'run "--port={port}"', "run \"a'b\" '{port}'", "sh -c 'x {port}'"],
)
def test_a_placeholder_inside_the_manifests_own_quotes_is_refused(template):
    with pytest.raises(PlaceholderError, match="inside quotes"):
        check_placeholders(template, {"port"})


@pytest.mark.parametrize("template", ["run {port}", "run 'a' {port} \"b\"", "run \\'{port}"])
def test_a_bare_placeholder_beside_quoted_text_is_accepted(template):
    check_placeholders(template, {"port"})


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("run {nope}", "unknown placeholder {nope}"),
        ("run ${HOME}", "unknown placeholder {HOME}"),
        ("run {port!r}", "bad placeholder"),
        ("run {port:>5}", "bad placeholder"),
        ("run {0}", "bad placeholder"),
        ("run {port", "bad braces"),
        ("run port}", "bad braces"),
    ],
)
def test_bad_placeholders_are_refused_with_a_reason(template, message):
    with pytest.raises(PlaceholderError, match=message.replace("{", r"\{")):
        check_placeholders(template, {"port"})
