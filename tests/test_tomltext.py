"""TOML with a bound on nesting (serverlab.base.tomltext): deep files are refused at their
line before tomllib recurses; every other file reads exactly as tomllib reads it."""

import tomllib
from pathlib import Path

import pytest
from conftest import REFERENCE_MANIFEST, write_manifest

from serverlab.base import tomltext
from serverlab.contestant.manifest import ManifestError, load_manifest

REPOSITORY = Path(__file__).resolve().parent.parent


def test_every_toml_file_of_the_repository_reads_as_tomllib_reads_it():
    files = [p for p in REPOSITORY.rglob("*.toml") if "target" not in p.parts]
    assert len(files) > 10
    for path in files:
        text = path.read_text()
        assert tomltext.loads(text) == tomllib.loads(text), path


@pytest.mark.parametrize(
    ("text", "depth"),
    [
        ("x = " + "[" * 99 + "1" + "]" * 99, 100),
        ("x = " + "{a = " * 99 + "1" + "}" * 99, 100),
        (".".join(["k"] * 100) + " = 1", 100),
        ("[[" + ".".join(["k"] * 98) + "]]\nx = 1", 100),
    ],
)
def test_nesting_up_to_the_limit_is_read(text, depth):
    doc, seen = tomltext.loads(text), 0
    while isinstance(doc, dict | list) and doc:
        doc = doc[0] if isinstance(doc, list) else next(iter(doc.values()))
        seen += 1
    assert seen == depth


@pytest.mark.parametrize(
    "text",
    [
        "x = " + "[" * 100 + "]" * 100,
        "x = " + "{a = " * 100 + "1" + "}" * 100,
        ".".join(["k"] * 101) + " = 1",
        "[[" + ".".join(["k"] * 99) + "]]\nx = 1",
        "x = " + "[" * 10**6,
    ],
)
def test_nesting_past_the_limit_is_refused_at_its_line(text):
    with pytest.raises(tomllib.TOMLDecodeError, match=r"nested deeper than 100 levels \(at line"):
        tomltext.loads('a = "b"\n\n' + text)


@pytest.mark.parametrize(
    "text",
    [
        'x = "' + "[" * 200 + '"',
        "x = '" + "[" * 200 + "'",
        'x = """\n' + "[" * 200 + '\n"""',
        "x = '''" + "{" * 200 + "'''",
        'x = "\\"' + "[" * 200 + '"',
        'x = """a\\""""\ny = "' + "[" * 200 + '"',
        "x = 1 # " + "[" * 200,
        '["' + "." * 200 + '"]\nx = 1',
    ],
)
def test_brackets_and_dots_in_strings_and_comments_do_not_count(text):
    assert tomltext.loads(text) == tomllib.loads(text)


def test_a_deep_manifest_is_a_broken_manifest_not_a_traceback(tmp_path):
    deep = REFERENCE_MANIFEST + "\nx = " + "[" * 500 + "]" * 500 + "\n"
    path = write_manifest(tmp_path, "reference", deep)
    with pytest.raises(ManifestError, match="nested deeper than 100 levels"):
        load_manifest(path)
