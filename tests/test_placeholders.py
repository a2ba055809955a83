import pytest

from serverlab.placeholders import PlaceholderError, check_placeholders, expand, placeholders_in


def test_placeholders_are_listed_in_order():
    assert placeholders_in("run --port {port} --dir {workdir} {port}") == [
        "port",
        "workdir",
        "port",
    ]


def test_expand_fills_every_placeholder():
    assert expand("x {port} {name}", {"port": "8080", "name": "n"}) == "x 8080 n"


def test_doubled_braces_are_literal_braces_for_the_shell():
    assert expand("echo ${{HOME}} {port}", {"port": "1"}) == "echo ${HOME} 1"


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
