//! TLS to PostgreSQL on rustls (the `ring` provider): libpq's `sslmode` values and
//! `sslrootcert`, a [`MakeTlsConnect`] for tokio-postgres, and clear certificate errors.
//!
//! tokio-postgres itself only knows `disable`, `prefer` and `require`, and refuses the
//! `verify-*` modes and `sslrootcert` in a URL; [`split_tls_params`] takes both out of the URL
//! (URL and key=value forms) before the driver parses it.

use crate::error::{PgError, TlsHandshakeError};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use std::future::Future;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};

/// libpq's `sslmode`: whether the connection uses TLS and what it verifies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SslMode {
    /// Plain TCP, never TLS.
    Disable,
    /// TLS when the server offers it, else plain; the certificate is not verified (the default,
    /// as in libpq).
    #[default]
    Prefer,
    /// TLS or no connection; the certificate is not verified (libpq without a root
    /// certificate). With an explicit root certificate it behaves like [`SslMode::VerifyCa`],
    /// as libpq's does.
    Require,
    /// TLS, and the server's certificate chain must lead to the root certificate; the host name
    /// is not checked.
    VerifyCa,
    /// TLS, the chain is verified and the certificate must name the host connected to.
    VerifyFull,
}

impl SslMode {
    /// Parse libpq's spelling (`disable`, `prefer`, `require`, `verify-ca`, `verify-full`).
    /// `allow` (libpq: plain first, TLS if the server insists) is not supported.
    ///
    /// ```
    /// use memloop_pg::SslMode;
    /// assert_eq!(SslMode::parse("verify-full"), Some(SslMode::VerifyFull));
    /// assert_eq!(SslMode::parse("sometimes"), None);
    /// ```
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "disable" => Self::Disable,
            "prefer" => Self::Prefer,
            "require" => Self::Require,
            "verify-ca" => Self::VerifyCa,
            "verify-full" => Self::VerifyFull,
            _ => return None,
        })
    }

    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Disable => "disable",
            Self::Prefer => "prefer",
            Self::Require => "require",
            Self::VerifyCa => "verify-ca",
            Self::VerifyFull => "verify-full",
        }
    }

    /// The driver's mode: the verify modes are `require` to tokio-postgres (the verification is
    /// this crate's certificate verifier).
    pub(crate) fn driver(self) -> tokio_postgres::config::SslMode {
        match self {
            Self::Disable => tokio_postgres::config::SslMode::Disable,
            Self::Prefer => tokio_postgres::config::SslMode::Prefer,
            Self::Require | Self::VerifyCa | Self::VerifyFull => {
                tokio_postgres::config::SslMode::Require
            }
        }
    }
}

impl std::fmt::Display for SslMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The TLS settings found in a connection string, and the string without them.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TlsParams {
    /// The connection string without `sslmode` and `sslrootcert`.
    pub(crate) rest: String,
    /// `sslmode`, as written.
    pub(crate) sslmode: Option<String>,
    /// `sslrootcert`, decoded.
    pub(crate) sslrootcert: Option<String>,
    /// `sslcert` (the client certificate chain), decoded.
    pub(crate) sslcert: Option<String>,
    /// `sslkey` (the client certificate's private key), decoded.
    pub(crate) sslkey: Option<String>,
}

/// Take `sslmode`, `sslrootcert`, `sslcert` and `sslkey` out of a URL (`postgres://...?sslmode=verify-full`) or a
/// key=value string (`host=db sslmode='verify-full'`). The rest is left byte for byte.
pub(crate) fn split_tls_params(url: &str) -> Result<TlsParams, PgError> {
    let is_url = url.starts_with("postgres://") || url.starts_with("postgresql://");
    if is_url {
        split_url(url)
    } else {
        split_key_value(url)
    }
}

fn split_url(url: &str) -> Result<TlsParams, PgError> {
    let Some((base, query)) = url.split_once('?') else {
        return Ok(TlsParams {
            rest: url.to_owned(),
            ..TlsParams::default()
        });
    };
    let mut out = TlsParams::default();
    let mut kept = Vec::new();
    for pair in query.split('&') {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match percent_decode(key)?.as_str() {
            "sslmode" => out.sslmode = Some(percent_decode(value)?),
            "sslrootcert" => out.sslrootcert = Some(percent_decode(value)?),
            "sslcert" => out.sslcert = Some(percent_decode(value)?),
            "sslkey" => out.sslkey = Some(percent_decode(value)?),
            _ => kept.push(pair),
        }
    }
    out.rest = if kept.is_empty() {
        base.to_owned()
    } else {
        format!("{base}?{}", kept.join("&"))
    };
    Ok(out)
}

fn percent_decode(s: &str) -> Result<String, PgError> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' => {
                let hex = bytes
                    .get(i + 1..i + 3)
                    .and_then(|h| std::str::from_utf8(h).ok())
                    .and_then(|h| u8::from_str_radix(h, 16).ok())
                    .ok_or_else(|| {
                        PgError::InvalidUrl(
                            "a `%` in the query is not followed by two hex digits".into(),
                        )
                    })?;
                out.push(hex);
                i += 3;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8(out).map_err(|_| {
        PgError::InvalidUrl("a query parameter is not valid UTF-8 once decoded".into())
    })
}

fn split_key_value(s: &str) -> Result<TlsParams, PgError> {
    let mut out = TlsParams::default();
    let mut rest = String::with_capacity(s.len());
    let mut copied_to = 0;
    let mut chars = s.char_indices().peekable();
    loop {
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let Some(&(start, _)) = chars.peek() else {
            break;
        };
        let mut key = String::new();
        while let Some((_, c)) = chars.next_if(|(_, c)| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        if chars.next_if(|(_, c)| *c == '=').is_none() {
            // Not key=value: leave it to the driver, which says what is wrong.
            return Ok(TlsParams {
                rest: s.to_owned(),
                ..TlsParams::default()
            });
        }
        while chars.next_if(|(_, c)| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if(|(_, c)| *c == '\'').is_some() {
            loop {
                match chars.next() {
                    Some((_, '\'')) => break,
                    Some((_, '\\')) => match chars.next() {
                        Some((_, c)) => value.push(c),
                        None => return Err(unterminated()),
                    },
                    Some((_, c)) => value.push(c),
                    None => return Err(unterminated()),
                }
            }
        } else {
            while let Some((_, c)) = chars.next_if(|(_, c)| !c.is_whitespace()) {
                if c == '\\' {
                    if let Some((_, escaped)) = chars.next() {
                        value.push(escaped);
                    }
                } else {
                    value.push(c);
                }
            }
        }
        let end = chars.peek().map_or(s.len(), |&(i, _)| i);
        let slot = match key.as_str() {
            "sslmode" => &mut out.sslmode,
            "sslrootcert" => &mut out.sslrootcert,
            "sslcert" => &mut out.sslcert,
            "sslkey" => &mut out.sslkey,
            _ => continue,
        };
        *slot = Some(value);
        rest.push_str(&s[copied_to..start]);
        copied_to = end;
    }
    rest.push_str(&s[copied_to..]);
    out.rest = rest;
    Ok(out)
}

fn unterminated() -> PgError {
    PgError::InvalidUrl("a quoted value in the connection string is not closed".into())
}

/// The rustls provider: `ring`, whatever else the process installed as default.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Where `verify-*` modes take their trust anchors from, for error messages.
#[derive(Debug, Clone)]
enum Roots {
    File(PathBuf),
    Bundled,
}

impl std::fmt::Display for Roots {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::File(p) => write!(f, "the root certificate `{}`", p.display()),
            Self::Bundled => f.write_str(
                "any root of the bundled Mozilla root store (set `sslrootcert` to the server's CA)",
            ),
        }
    }
}

/// Read the PEM certificates of `path` into a root store; every failure names the file.
pub(crate) fn load_root_file(path: &Path) -> Result<RootCertStore, PgError> {
    let named =
        |why: String| PgError::Tls(format!("root certificate file `{}`: {why}", path.display()));
    let bytes = std::fs::read(path).map_err(|e| named(format!("cannot read it: {e}")))?;
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(&bytes) {
        let cert = cert.map_err(|e| named(format!("not a valid PEM certificate: {e}")))?;
        roots
            .add(cert)
            .map_err(|e| named(format!("not a usable certificate: {e}")))?;
    }
    if roots.is_empty() {
        return Err(named(
            "it holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)".into(),
        ));
    }
    Ok(roots)
}

/// A client certificate (`sslcert`: the PEM chain, leaf first) and its private key (`sslkey`:
/// PEM, PKCS#8, PKCS#1 or SEC1), for servers that authenticate clients by certificate
/// (`clientcert=verify-ca|verify-full` in `pg_hba.conf`, `cert` authentication). Every failure
/// names the file; a key is never printed.
pub(crate) fn load_client_identity(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), PgError> {
    let named = |path: &Path, what: &str, why: String| {
        PgError::Tls(format!("client {what} file `{}`: {why}", path.display()))
    };
    let bytes = std::fs::read(cert)
        .map_err(|e| named(cert, "certificate", format!("cannot read it: {e}")))?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            named(
                cert,
                "certificate",
                format!("not a valid PEM certificate: {e}"),
            )
        })?;
    if chain.is_empty() {
        return Err(named(
            cert,
            "certificate",
            "it holds no PEM certificate (`-----BEGIN CERTIFICATE-----`)".into(),
        ));
    }
    let bytes =
        std::fs::read(key).map_err(|e| named(key, "key", format!("cannot read it: {e}")))?;
    let key_der = PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
        named(
            key,
            "key",
            format!("no usable PEM private key (PKCS#8, PKCS#1 or SEC1): {e}"),
        )
    })?;
    Ok((chain, key_der))
}

/// The verifier for one mode. `require`/`prefer` accept any certificate (libpq's meaning: the
/// traffic is encrypted, the server is not authenticated) but still check the handshake
/// signature against it; `verify-ca` checks the chain; `verify-full` the chain and the name.
#[derive(Debug)]
struct Verifier {
    mode: SslMode,
    roots: Arc<RootCertStore>,
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if matches!(self.mode, SslMode::VerifyCa | SslMode::VerifyFull) {
            let cert = rustls::server::ParsedCertificate::try_from(end_entity)?;
            rustls::client::verify_server_cert_signed_by_trust_anchor(
                &cert,
                &self.roots,
                intermediates,
                now,
                self.provider.signature_verification_algorithms.all,
            )?;
            if self.mode == SslMode::VerifyFull {
                rustls::client::verify_server_name(&cert, server_name)?;
            }
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// tokio-postgres' TLS connector on rustls for one [`SslMode`].
#[derive(Clone)]
pub(crate) struct MakeRustlsConnect {
    config: Arc<rustls::ClientConfig>,
    mode: SslMode,
    roots: Roots,
}

impl std::fmt::Debug for MakeRustlsConnect {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MakeRustlsConnect")
            .field("mode", &self.mode)
            .field("roots", &self.roots)
            .finish_non_exhaustive()
    }
}

impl MakeRustlsConnect {
    /// The connector for `mode` (after libpq's `require` + root file = `verify-ca` rule), with
    /// the roots of `root_file` or, without one, the bundled Mozilla roots, presenting the
    /// `client` certificate and key when given. The root file is read only when the mode
    /// verifies; the client files whenever TLS may be used.
    pub(crate) fn new(
        mode: SslMode,
        root_file: Option<&Path>,
        client: Option<(&Path, &Path)>,
    ) -> Result<Self, PgError> {
        let mode = match (mode, root_file) {
            (SslMode::Require, Some(_)) => SslMode::VerifyCa,
            (m, _) => m,
        };
        let verifies = matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull);
        let (roots, source) = match root_file {
            Some(path) if verifies => (load_root_file(path)?, Roots::File(path.to_owned())),
            _ if verifies => (
                RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                },
                Roots::Bundled,
            ),
            _ => (RootCertStore::empty(), Roots::Bundled),
        };
        let provider = provider();
        let verifier = Verifier {
            mode,
            roots: Arc::new(roots),
            provider: provider.clone(),
        };
        let builder = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| PgError::Tls(format!("TLS setup: {e}")))?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier));
        let config = match client {
            Some((cert, key)) if mode != SslMode::Disable => {
                let (chain, key_der) = load_client_identity(cert, key)?;
                builder.with_client_auth_cert(chain, key_der).map_err(|e| {
                    PgError::Tls(format!(
                        "client certificate `{}` and key `{}` do not go together: {e}",
                        cert.display(),
                        key.display()
                    ))
                })?
            }
            _ => builder.with_no_client_auth(),
        };
        Ok(Self {
            config: Arc::new(config),
            mode,
            roots: source,
        })
    }

    /// The effective mode (`require` with a root file is `verify-ca`).
    pub(crate) fn mode(&self) -> SslMode {
        self.mode
    }
}

impl<S> MakeTlsConnect<S> for MakeRustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type TlsConnect = RustlsConnect;
    type Error = TlsHandshakeError;

    fn make_tls_connect(&mut self, domain: &str) -> Result<RustlsConnect, TlsHandshakeError> {
        let name = ServerName::try_from(domain.to_owned()).map_err(|_| {
            TlsHandshakeError(format!(
                "`{domain}` is not a host name or IP address TLS can check a certificate against"
            ))
        })?;
        Ok(RustlsConnect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name,
            mode: self.mode,
            roots: self.roots.clone(),
        })
    }
}

/// One TLS connection attempt.
pub(crate) struct RustlsConnect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
    mode: SslMode,
    roots: Roots,
}

impl<S> TlsConnect<S> for RustlsConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = RustlsStream<S>;
    type Error = TlsHandshakeError;
    type Future = Pin<Box<dyn Future<Output = Result<RustlsStream<S>, TlsHandshakeError>> + Send>>;

    fn connect(self, stream: S) -> Self::Future {
        Box::pin(async move {
            let host = self.name.to_str().into_owned();
            match self.connector.connect(self.name, stream).await {
                Ok(s) => {
                    tracing::debug!(host = %host, mode = %self.mode, "TLS session to PostgreSQL established");
                    Ok(RustlsStream(s))
                }
                Err(e) => Err(explain(&e, &host, self.mode, &self.roots)),
            }
        })
    }
}

/// A clear message for a failed handshake.
fn explain(e: &std::io::Error, host: &str, mode: SslMode, roots: &Roots) -> TlsHandshakeError {
    let rustls_error = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let msg = match rustls_error {
        Some(rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        )) => format!(
            "the server certificate does not name the host `{host}` (sslmode={mode}); connect \
             with a host name the certificate lists, or use sslmode=verify-ca"
        ),
        Some(rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer)) => {
            format!("the server certificate is not signed by {roots} (sslmode={mode})")
        }
        Some(rustls::Error::InvalidCertificate(other)) => {
            format!("the server certificate was refused (sslmode={mode}): {other:?}")
        }
        Some(other) => format!("TLS handshake with `{host}` failed (sslmode={mode}): {other}"),
        None => format!("TLS handshake with `{host}` failed (sslmode={mode}): {e}"),
    };
    TlsHandshakeError(msg)
}

/// A TLS stream to PostgreSQL.
pub(crate) struct RustlsStream<S>(tokio_rustls::client::TlsStream<S>);

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncRead for RustlsStream<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> AsyncWrite for RustlsStream<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl<S: AsyncRead + AsyncWrite + Unpin> TlsStream for RustlsStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        // SCRAM channel binding (tls-server-end-point) needs the hash of the certificate's
        // signature algorithm; without parsing it, SCRAM runs without channel binding (the
        // driver's `channel_binding=prefer` then falls back), which every server accepts.
        ChannelBinding::none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn url_form_loses_only_the_tls_parameters() {
        let p = split_tls_params(
            "postgresql://alice:pw@db.example.com:5433/team?sslmode=verify-full&application_name=x&sslrootcert=%2Ftmp%2F%E8%AF%81%E4%B9%A6.pem",
        )
        .unwrap();
        assert_eq!(p.sslmode.as_deref(), Some("verify-full"));
        assert_eq!(p.sslrootcert.as_deref(), Some("/tmp/证书.pem"));
        assert_eq!(
            p.rest,
            "postgresql://alice:pw@db.example.com:5433/team?application_name=x"
        );
        let p = split_tls_params("postgres://db/team?sslmode=require").unwrap();
        assert_eq!(p.rest, "postgres://db/team");
        let p = split_tls_params("postgres://db/team").unwrap();
        assert_eq!((p.rest.as_str(), p.sslmode), ("postgres://db/team", None));
        assert!(split_tls_params("postgres://db/team?sslrootcert=%E8%AF").is_err());
        assert!(split_tls_params("postgres://db/team?sslrootcert=%zz").is_err());
    }

    #[test]
    fn key_value_form_loses_only_the_tls_parameters() {
        let p = split_tls_params(
            "host=localhost sslmode = verify-ca user=root sslrootcert='/tmp/корень сертификат/ルート\\'s.pem' dbname=test",
        )
        .unwrap();
        assert_eq!(p.sslmode.as_deref(), Some("verify-ca"));
        assert_eq!(
            p.sslrootcert.as_deref(),
            Some("/tmp/корень сертификат/ルート's.pem")
        );
        let cfg: tokio_postgres::Config = p.rest.parse().unwrap();
        assert_eq!(cfg.get_user(), Some("root"));
        assert_eq!(cfg.get_dbname(), Some("test"));
        let p = split_tls_params("host=db password='a b\\' c' dbname=t").unwrap();
        assert_eq!(p.rest, "host=db password='a b\\' c' dbname=t");
        assert!(split_tls_params("host=db sslrootcert='/never/closed").is_err());
    }

    #[test]
    fn a_missing_or_empty_root_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("нет-такого-файла.pem");
        let e = MakeRustlsConnect::new(SslMode::VerifyCa, Some(&missing), None).unwrap_err();
        assert!(matches!(e, PgError::Tls(_)), "{e:?}");
        assert!(e.to_string().contains("нет-такого-файла.pem"), "{e}");
        let empty = dir.path().join("空.pem");
        std::fs::write(&empty, "not a certificate").unwrap();
        let e = MakeRustlsConnect::new(SslMode::VerifyFull, Some(&empty), None).unwrap_err();
        assert!(e.to_string().contains("空.pem"), "{e}");
        assert!(e.to_string().contains("no PEM certificate"), "{e}");
        // Modes that do not verify never read it.
        assert!(MakeRustlsConnect::new(SslMode::Prefer, Some(&missing), None).is_ok());
        // libpq's rule: `require` with a root file verifies the chain.
        assert!(MakeRustlsConnect::new(SslMode::Require, Some(&missing), None).is_err());
        assert_eq!(
            MakeRustlsConnect::new(SslMode::Require, None, None)
                .unwrap()
                .mode(),
            SslMode::Require
        );
    }
}
