//! Plan stage: TLS under the behaviour. An `https://` or `wss://` target carries its requests
//! over rustls (TLS 1.2 and 1.3, ring's AEAD suites); the plan says whom to trust (a CA file,
//! and only it, or explicitly nobody: `insecure`), whether sessions resume, and the key
//! exchange group. The client configuration is built here, once, when the plan is validated,
//! so that a bad CA file is refused before any socket exists.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::Resumption;
use rustls::crypto::{ring, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::PlanError;

/// TLS settings; they apply when the target is `https://` or `wss://`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TlsSpec {
    /// A PEM file of the CA certificates to trust, and only those (a suite passes the lab's
    /// per-run CA). Exclusive with `insecure`.
    #[serde(default)]
    pub ca_file: Option<PathBuf>,
    /// Accept any server certificate. Explicit, and recorded in the summary's plan.
    #[serde(default)]
    pub insecure: bool,
    /// Resume sessions (TLS 1.3 tickets, TLS 1.2 tickets or session IDs) on new connections.
    #[serde(default = "resume_default")]
    pub resume: bool,
    /// The key exchange group offered.
    #[serde(default)]
    pub group: KxGroup,
}

fn resume_default() -> bool {
    true
}

impl Default for TlsSpec {
    fn default() -> TlsSpec {
        TlsSpec {
            ca_file: None,
            insecure: false,
            resume: true,
            group: KxGroup::default(),
        }
    }
}

/// A key exchange group.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum KxGroup {
    #[default]
    X25519,
    P256,
}

/// What a TLS connection needs: the client configuration (its session cache is shared by
/// every connection of the run, so resumption works across workers) and the server's name.
#[derive(Debug, Clone)]
pub struct TlsClient {
    pub config: Arc<ClientConfig>,
    pub name: ServerName<'static>,
}

impl TlsSpec {
    /// The rules that need no file: whom to trust must be said, once.
    pub fn check(&self) -> Result<(), PlanError> {
        match (&self.ca_file, self.insecure) {
            (Some(_), true) => Err(contradiction("give tls.ca_file or tls.insecure, not both")),
            (None, false) => Err(contradiction(
                "a TLS target needs a CA to trust (--tls-ca FILE) or an explicit --insecure",
            )),
            _ => Ok(()),
        }
    }

    /// The client configuration, reading the CA file; `host` is the target's host (an IP
    /// literal is verified against the certificate's IP names and sends no SNI); `alpn` the
    /// protocols offered (`h2` for HTTP/2, none for HTTP/1.1).
    pub fn client(&self, host: &str, alpn: &[&[u8]]) -> Result<TlsClient, PlanError> {
        self.check()?;
        let provider = Arc::new(self.provider());
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[&rustls::version::TLS13, &rustls::version::TLS12])
            .map_err(|e| contradiction(&format!("TLS setup: {e}")))?;
        let mut config = match &self.ca_file {
            Some(path) => builder.with_root_certificates(read_roots(path)?),
            None => builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider))),
        }
        .with_no_client_auth();
        config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
        if !self.resume {
            config.resumption = Resumption::disabled();
        }
        let name = ServerName::try_from(host.to_string())
            .map_err(|_| contradiction(&format!("TLS server name {host:?} is not valid")))?;
        Ok(TlsClient {
            config: Arc::new(config),
            name,
        })
    }

    /// ring's suites (AEAD only) with the one group asked for.
    fn provider(&self) -> CryptoProvider {
        let group = match self.group {
            KxGroup::X25519 => ring::kx_group::X25519,
            KxGroup::P256 => ring::kx_group::SECP256R1,
        };
        CryptoProvider {
            kx_groups: vec![group],
            ..ring::default_provider()
        }
    }
}

fn contradiction(why: &str) -> PlanError {
    PlanError::Contradiction("tls", why.to_string())
}

/// Every certificate of a PEM file, as the only roots trusted.
fn read_roots(path: &Path) -> Result<RootCertStore, PlanError> {
    let bad = |why: String| PlanError::TlsCa(path.to_path_buf(), why);
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| bad(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| bad(e.to_string()))?;
    if certs.is_empty() {
        return Err(bad("no PEM certificate in it".into()));
    }
    let mut roots = RootCertStore::empty();
    for cert in certs {
        roots.add(cert).map_err(|e| bad(e.to_string()))?;
    }
    Ok(roots)
}

/// `insecure`: any certificate is taken, but the handshake's signatures are still checked, so
/// the cost of a handshake is the same as with verification.
#[derive(Debug)]
struct AnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algorithms = &self.0.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}
