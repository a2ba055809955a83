//! The TLS configuration (spec §12, §15): the certificate and key serverlab made for the
//! run, TLS 1.2 and 1.3 only, and rustls's suites, which are all AEAD (it has no CBC or
//! stream cipher to refuse). The crypto is ring's.

use rustls::crypto::ring::{Ticketer, default_provider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::version::{TLS12, TLS13};
use rustls::{ServerConfig, SupportedProtocolVersion};
use std::path::Path;
use std::sync::Arc;

/// Newest first, and nothing older than TLS 1.2: a TLS 1.1 hello gets protocol_version.
const VERSIONS: [&SupportedProtocolVersion; 2] = [&TLS13, &TLS12];
/// The only application protocol offered by ALPN: this server does not speak h2. A client
/// that offers neither gets rustls's no_application_protocol alert; one that sends no ALPN
/// is served HTTP/1.1.
const HTTP_1_1: &[u8] = b"http/1.1";

/// The configurations of the HTTPS port and of the RFC 5425 syslog port, which share the
/// certificate, the key and the session tickets.
pub struct TlsConfigs {
    pub https: Arc<ServerConfig>,
    pub syslog: Arc<ServerConfig>,
}

pub fn load(cert: &Path, key: &Path) -> Result<TlsConfigs, String> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
        .map_err(|error| format!("certificate {}: {error}", cert.display()))?;
    if chain.is_empty() {
        return Err(format!(
            "certificate {}: no certificate in it",
            cert.display()
        ));
    }
    let private = PrivateKeyDer::from_pem_file(key)
        .map_err(|error| format!("key {}: {error}", key.display()))?;
    let mut syslog = ServerConfig::builder_with_provider(Arc::new(default_provider()))
        .with_protocol_versions(&VERSIONS)
        .and_then(|builder| {
            builder
                .with_no_client_auth()
                .with_single_cert(chain, private)
        })
        .map_err(|error| format!("TLS configuration: {error}"))?;
    // Resumption as a user would have it: TLS 1.3 tickets and TLS 1.2 session IDs from
    // rustls's session cache (its default), and stateless tickets that any thread can
    // take for both.
    syslog.ticketer = Ticketer::new().map_err(|error| format!("session tickets: {error}"))?;
    let mut https = syslog.clone();
    https.alpn_protocols = vec![HTTP_1_1.to_vec()];
    Ok(TlsConfigs {
        https: Arc::new(https),
        syslog: Arc::new(syslog),
    })
}
