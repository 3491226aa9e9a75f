//! [`TlsIdentity`]: the certificate and key `serve_http` serves HTTPS with (rustls on the `ring`
//! provider, HTTP/2 and HTTP/1.1 offered by ALPN).

use crate::server::McpServeError;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;

/// A server certificate chain and its private key, ready to serve TLS. Cheap to clone.
#[derive(Clone)]
pub struct TlsIdentity {
    config: Arc<rustls::ServerConfig>,
}

impl std::fmt::Debug for TlsIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key.
        f.debug_struct("TlsIdentity").finish_non_exhaustive()
    }
}

impl TlsIdentity {
    /// Load a PEM certificate chain (server certificate first, then intermediates) and a PEM
    /// private key (PKCS#8, PKCS#1 or SEC1). Every failure names the file: unreadable, no
    /// certificate or key in it, or a key that does not belong to the certificate.
    pub fn load(cert_file: &Path, key_file: &Path) -> Result<Self, McpServeError> {
        let cert_pem = std::fs::read(cert_file).map_err(|e| {
            McpServeError(format!(
                "cannot read the TLS certificate file {}: {e}",
                cert_file.display()
            ))
        })?;
        let key_pem = std::fs::read(key_file).map_err(|e| {
            McpServeError(format!(
                "cannot read the TLS key file {}: {e}",
                key_file.display()
            ))
        })?;
        Self::from_pem_named(
            &cert_pem,
            &key_pem,
            &cert_file.display().to_string(),
            &key_file.display().to_string(),
        )
    }

    /// [`TlsIdentity::load`] from PEM text already in memory.
    pub fn from_pem(cert_pem: &[u8], key_pem: &[u8]) -> Result<Self, McpServeError> {
        Self::from_pem_named(cert_pem, key_pem, "(certificate)", "(key)")
    }

    fn from_pem_named(
        cert_pem: &[u8],
        key_pem: &[u8],
        cert_name: &str,
        key_name: &str,
    ) -> Result<Self, McpServeError> {
        let certs = CertificateDer::pem_slice_iter(cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| {
                McpServeError(format!(
                    "the TLS certificate file {cert_name} is not valid PEM: {e}"
                ))
            })?;
        if certs.is_empty() {
            return Err(McpServeError(format!(
                "the TLS certificate file {cert_name} holds no certificate \
                 (`-----BEGIN CERTIFICATE-----`)"
            )));
        }
        let key = PrivateKeyDer::from_pem_slice(key_pem).map_err(|e| {
            McpServeError(format!(
                "the TLS key file {key_name} holds no usable private key (PKCS#8, PKCS#1 or SEC1 \
                 PEM): {e}"
            ))
        })?;
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .map_err(|e| McpServeError(format!("TLS setup: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| {
            McpServeError(format!(
                "the TLS key file {key_name} and certificate file {cert_name} cannot serve \
                 together: {e}"
            ))
        })?;
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Self {
            config: Arc::new(config),
        })
    }

    /// The acceptor for one listener.
    pub(crate) fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.config.clone())
    }
}
