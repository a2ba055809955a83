"""The spec version comes from spec/SPEC.md, and the reference server implements it."""

from reference_server import SPEC_VERSION

from serverlab.base.paths import spec_file
from serverlab.base.spec import same_major, spec_version


def test_the_version_is_the_one_spec_md_states():
    assert f'spec_version = "{spec_version()}"' in spec_file().read_text()
    assert spec_version() == SPEC_VERSION, "the reference server implements this spec"


def test_only_the_major_must_match():
    major = int(spec_version().split(".")[0])
    assert same_major(spec_version()) and same_major(f"{major}.99")
    assert not same_major(f"{major - 1}.0")
    assert not same_major(f"{major + 1}.0")
    assert not same_major("")
