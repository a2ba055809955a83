import pytest

from serverlab.contestant.manifest import find
from serverlab.contestant.tunables import Tunable, TunableValueError


def make(kind: str, **typing) -> Tunable:
    return Tunable("t", "0", kind, **typing)


@pytest.mark.parametrize(
    ("tunable", "value", "rendered"),
    [
        (make("int", min=0, max=10), "7", "7"),
        (make("int", min=0, max=10), "+007", "7"),
        (make("number", min=0), "1.5", "1.5"),
        (make("number"), "2.0", "2"),
        (make("size", write="jvm"), "2400m", "2400m"),
        (make("size", write="jvm"), "2G", "2g"),
        (make("size", write="kb"), "512k", "512KB"),
        (make("size", write="kb"), "1MB", "1MB"),
        (make("size", write="kb"), "4096", "4096"),
        (make("size", write="bytes"), "64K", "65536"),
        (make("word", words=("fifo", "spt")), "spt", "spt"),
        (make("int", min=1, words=("off",)), "off", "off"),
        (make("int", min=1, words=("off",)), "256", "256"),
        (make("path"), "/tmp/a b/'q'/$(touch M)/`x`", "/tmp/a b/'q'/$(touch M)/`x`"),
    ],
)
def test_each_type_renders_a_value_the_way_the_server_wants_it(tunable, value, rendered):
    assert tunable.render(value) == rendered


@pytest.mark.parametrize(
    ("tunable", "value", "message"),
    [
        (make("int", min=0, max=10), "11", r"an integer in 0\.\.10"),
        (make("int"), "1.5", "an integer"),
        (make("int"), "$(touch M)", "an integer"),
        (make("int"), "", "an integer"),
        (make("number"), "nan", "a number"),
        (make("number"), "inf", "a number"),
        (make("size", write="kb", min=1024, max=512 * 1024**2), "1G", r"in 1K\.\.512M"),
        (make("size"), "12T", "a size"),
        (make("size"), "-1K", "a size"),
        (make("word", words=("fifo", "spt")), "lifo", "one of fifo, spt"),
        (make("word", words=("a",)), "a; rm -rf /", "one of a"),
        (make("int", min=1, words=("off",)), "on", "or 'off'"),
        (make("path"), "a\0b", "without NUL"),
    ],
)
def test_a_value_outside_the_type_is_refused_with_what_it_accepts(tunable, value, message):
    with pytest.raises(TunableValueError, match=message):
        tunable.render(value)


def test_every_contestant_declares_typed_tunables_whose_defaults_render():
    for name in ("rust-zhtta", "java-tomcat-blocking", "node-http", "ruby-eventmachine"):
        for tunable in find(name).tunables.values():
            assert tunable.type in ("int", "number", "size", "word", "path")
            assert tunable.render(tunable.default)
    zhtta = find("rust-zhtta").tunables
    assert zhtta["cache"].render("off") == "off" and zhtta["cache"].render("256") == "256"
    assert zhtta["chunk_size"].render("512K") == "512KB"
    assert find("java-netty").tunables["xmx"].render("2400M") == "2400m"
