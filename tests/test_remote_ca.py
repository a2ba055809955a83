"""The CA of a TLS run travels to remote generators as PEM text (issue 22): what a generator
accepts and refuses, called in-process on a real Generator with real key material. The
lab test (tests/test_cluster.py) runs a real TLS load from generators that cannot see the
CA file's path."""

import ipaddress

import pytest
from cryptography import x509

from serverlab.base.tlskeys import CaPemError, make_key_material, read_ca_pem
from serverlab.cluster.actors import CA_COPY, Generator
from serverlab.cluster.adhoc import plan_of
from serverlab.cluster.errors import ClusterError
from serverlab.cluster.traffic import _ca_pem
from serverlab.run.execution.engine import EngineError

# Where no generator has a file: the CA path of a plan made on another host.
ELSEWHERE = "/nonexistent/server-host/tls/ca.pem"


def tls_plan(ca_file: str) -> dict:
    """A TLS plan as the engine makes it of its own flags."""
    return plan_of(["https://127.0.0.1:8443/perf", "--tls-ca", ca_file, "-c", "2", "-d", "1s"])


def test_a_generator_refuses_a_tls_plan_that_came_without_its_cas_pem_in_one_line():
    generator = Generator()
    plan = tls_plan(ELSEWHERE)
    for call in (
        lambda: generator.prepare(plan, "127.0.0.1", 9, ca_pem=None),
        lambda: generator.run(plan, 5.0),
    ):
        with pytest.raises(EngineError) as refused:
            call()
        message = str(refused.value)
        assert "\n" not in message and ELSEWHERE in message
        assert "came without that CA's PEM" in message
    assert not (generator.workdir / CA_COPY).exists()


def test_a_private_key_never_leaves_as_a_ca_and_a_generator_refuses_one(tmp_path):
    material = make_key_material(tmp_path / "tls")
    with pytest.raises(CaPemError, match="holds a private key"):
        read_ca_pem(material.key)
    # A certificate with its key appended is refused whole, on either side.
    bundle = tmp_path / "bundle.pem"
    bundle.write_text(material.cert.read_text() + material.key.read_text())
    with pytest.raises(ClusterError, match=f"the CA file {bundle} holds a private key"):
        _ca_pem(tls_plan(str(bundle)))
    with pytest.raises(EngineError, match="the CA sent with the plan holds a private key"):
        Generator().run(tls_plan(ELSEWHERE), 5.0, ca_pem=bundle.read_text())
    with pytest.raises(ClusterError, match="cannot read the CA file /nonexistent/"):
        _ca_pem(tls_plan(ELSEWHERE))


def test_the_driver_sends_the_ca_certificate_alone_and_a_generator_points_its_plan_at_a_copy(
    tmp_path,
):
    material = make_key_material(tmp_path / "tls")
    pem = _ca_pem(tls_plan(str(material.ca_cert)))
    assert pem == material.ca_cert.read_text() and "PRIVATE" not in pem
    assert _ca_pem(plan_of(["http://127.0.0.1:8080/perf", "-c", "2", "-d", "1s"])) is None
    generator = Generator()
    own = generator._own_ca(tls_plan(ELSEWHERE), pem)
    copy = generator.workdir / CA_COPY
    assert own["tls"]["ca_file"] == str(copy) and copy.read_text() == pem


def test_the_server_certificate_names_the_address_remote_generators_connect_to(tmp_path):
    material = make_key_material(tmp_path / "tls", addresses=["198.18.0.5", "127.0.0.1"])
    cert = x509.load_pem_x509_certificate(material.cert.read_bytes())
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    addresses = names.get_values_for_type(x509.IPAddress)
    assert addresses == [ipaddress.ip_address("127.0.0.1"), ipaddress.ip_address("198.18.0.5")]
