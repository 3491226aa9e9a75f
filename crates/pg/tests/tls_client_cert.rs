//! Client certificates (`sslcert` / `sslkey`, `PgConfig::ssl_client_cert`) against a loopback
//! server that speaks PostgreSQL's TLS opening (the `SSLRequest`, `S`, the handshake) and requires
//! a client certificate signed by its CA, as `clientcert=verify-full` in `pg_hba.conf` does. After
//! the handshake it reads the startup message and answers with an `ErrorResponse` naming the
//! certificate it saw, so a connection that got that far proves the certificate was accepted.
//! The machine's own PostgreSQL cannot be reconfigured by a test, hence the loopback server.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_pg::{PgConfig, PgError};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A CA, a server certificate for `localhost` and a client certificate, both signed by it; and a
/// client certificate signed by nobody the server trusts. PEM files in `dir` (a path with CJK
/// and Cyrillic characters, as a user's home may have).
struct Pki {
    ca: PathBuf,
    server_chain: Vec<CertificateDer<'static>>,
    server_key: PrivateKeyDer<'static>,
    ca_der: CertificateDer<'static>,
    client_cert: PathBuf,
    client_key: PathBuf,
    stranger_cert: PathBuf,
    stranger_key: PathBuf,
}

fn pki(dir: &Path) -> Pki {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "memloop test CA");
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let server_key = KeyPair::generate().unwrap();
    let server = CertificateParams::new(vec!["localhost".to_owned()])
        .unwrap()
        .signed_by(&server_key, &issuer)
        .unwrap();

    let client_key = KeyPair::generate().unwrap();
    let mut client_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    client_params
        .distinguished_name
        .push(DnType::CommonName, "memloop");
    let client = client_params.signed_by(&client_key, &issuer).unwrap();

    let stranger_key = KeyPair::generate().unwrap();
    let stranger = CertificateParams::new(Vec::<String>::new())
        .unwrap()
        .self_signed(&stranger_key)
        .unwrap();

    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    };
    Pki {
        ca: write("根证书.pem", ca_cert.pem()),
        ca_der: ca_cert.der().clone(),
        server_chain: vec![server.der().clone()],
        server_key: PrivateKeyDer::try_from(server_key.serialize_der()).unwrap(),
        client_cert: write("клиент.crt", client.pem()),
        client_key: write("клиент.key", client_key.serialize_pem()),
        stranger_cert: write("stranger.crt", stranger.pem()),
        stranger_key: write("stranger.key", stranger_key.serialize_pem()),
    }
}

/// Serve PostgreSQL's TLS opening on a loopback port, requiring a client certificate signed by
/// the CA; returns the port.
async fn server(pki: &Pki) -> u16 {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(pki.ca_der.clone()).unwrap();
    let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_client_cert_verifier(verifier)
        .with_single_cert(pki.server_chain.clone(), pki.server_key.clone_key())
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        loop {
            let Ok((mut tcp, _)) = listener.accept().await else {
                return;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                // SSLRequest: length 8, code 80877103.
                let mut request = [0u8; 8];
                tcp.read_exact(&mut request).await?;
                assert_eq!(request, [0, 0, 0, 8, 4, 210, 22, 47]);
                tcp.write_all(b"S").await?;
                let mut tls = acceptor.accept(tcp).await?;
                let mut len = [0u8; 4];
                tls.read_exact(&mut len).await?;
                let mut startup = vec![0u8; (u32::from_be_bytes(len) as usize).saturating_sub(4)];
                tls.read_exact(&mut startup).await?;
                let seen = tls.get_ref().1.peer_certificates().map_or(0, <[_]>::len);
                let mut fields = Vec::new();
                for (code, value) in [
                    (b'S', "FATAL".to_owned()),
                    (b'V', "FATAL".to_owned()),
                    (b'C', "28000".to_owned()),
                    (
                        b'M',
                        format!("test server: client certificate accepted ({seen} in chain)"),
                    ),
                ] {
                    fields.push(code);
                    fields.extend_from_slice(value.as_bytes());
                    fields.push(0);
                }
                fields.push(0);
                let mut msg = vec![b'E'];
                msg.extend_from_slice(&(fields.len() as u32 + 4).to_be_bytes());
                msg.extend_from_slice(&fields);
                tls.write_all(&msg).await?;
                tls.flush().await?;
                tls.shutdown().await?;
                Ok::<_, std::io::Error>(())
            });
        }
    });
    port
}

fn kv(port: u16, extra: &str) -> String {
    format!("host=localhost port={port} user=root dbname=test sslmode=verify-full {extra}")
}

async fn error_of(config: PgConfig) -> String {
    match config.connect().await {
        Ok(_) => panic!("the test server never lets a session start"),
        Err(e) => e.to_string(),
    }
}

#[tokio::test]
async fn a_client_certificate_from_the_url_or_the_builder_is_presented() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let port = server(&pki).await;

    // key=value form.
    let url = kv(
        port,
        &format!(
            "sslrootcert='{}' sslcert='{}' sslkey='{}'",
            pki.ca.display(),
            pki.client_cert.display(),
            pki.client_key.display()
        ),
    );
    let e = error_of(PgConfig::new(url, "p")).await;
    assert!(
        e.contains("client certificate accepted (1 in chain)"),
        "{e}"
    );

    // URL form, paths percent-encoded.
    let enc = |p: &Path| utf8_percent_encode(&p.display().to_string());
    let url = format!(
        "postgres://root@localhost:{port}/test?sslmode=verify-full&sslrootcert={}&sslcert={}&sslkey={}",
        enc(&pki.ca),
        enc(&pki.client_cert),
        enc(&pki.client_key)
    );
    let e = error_of(PgConfig::new(url, "p")).await;
    assert!(e.contains("client certificate accepted"), "{e}");

    // The builder.
    let config = PgConfig::new(kv(port, ""), "p")
        .ssl_root_cert(&pki.ca)
        .ssl_client_cert(&pki.client_cert, &pki.client_key);
    let e = error_of(config).await;
    assert!(e.contains("client certificate accepted"), "{e}");
}

#[tokio::test]
async fn without_a_trusted_client_certificate_the_server_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());
    let port = server(&pki).await;

    let none = PgConfig::new(kv(port, ""), "p").ssl_root_cert(&pki.ca);
    let e = error_of(none).await;
    assert!(!e.contains("accepted"), "{e}");

    let stranger = PgConfig::new(kv(port, ""), "p")
        .ssl_root_cert(&pki.ca)
        .ssl_client_cert(&pki.stranger_cert, &pki.stranger_key);
    let e = error_of(stranger).await;
    assert!(!e.contains("accepted"), "{e}");
}

#[tokio::test]
async fn bad_client_certificate_settings_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let pki = pki(dir.path());

    // Half a pair, in either URL form.
    let half = PgConfig::new(
        format!("host=localhost sslcert='{}'", pki.client_cert.display()),
        "p",
    );
    let e = half.connect().await.unwrap_err();
    assert!(matches!(e, PgError::InvalidUrl(_)), "{e:?}");
    assert!(e.to_string().contains("without `sslkey`"), "{e}");
    let half = PgConfig::new("postgres://root@localhost/test?sslkey=%2Ftmp%2Fk.pem", "p");
    assert!(
        half.connect()
            .await
            .unwrap_err()
            .to_string()
            .contains("without `sslcert`")
    );

    // A missing key file, a key that is no key, and a key of another certificate: each names
    // the file, never the key's bytes.
    let missing = dir.path().join("нет.key");
    let e = PgConfig::new("host=localhost sslmode=require", "p")
        .ssl_client_cert(&pki.client_cert, &missing)
        .connect()
        .await
        .unwrap_err();
    assert!(matches!(e, PgError::Tls(_)), "{e:?}");
    assert!(
        e.to_string().contains("нет.key") && e.to_string().contains("cannot read"),
        "{e}"
    );

    let junk = dir.path().join("鍵.pem");
    std::fs::write(
        &junk,
        "-----BEGIN NOTHING-----\nAAAA\n-----END NOTHING-----\n",
    )
    .unwrap();
    let e = PgConfig::new("host=localhost sslmode=require", "p")
        .ssl_client_cert(&pki.client_cert, &junk)
        .connect()
        .await
        .unwrap_err();
    assert!(
        e.to_string().contains("鍵.pem") && e.to_string().contains("private key"),
        "{e}"
    );

    let e = PgConfig::new("host=localhost sslmode=require", "p")
        .ssl_client_cert(&pki.client_cert, &pki.stranger_key)
        .connect()
        .await
        .unwrap_err();
    assert!(e.to_string().contains("do not go together"), "{e}");
    let key_text = std::fs::read_to_string(&pki.stranger_key).unwrap();
    let body = key_text.lines().nth(1).unwrap();
    assert!(!e.to_string().contains(body));

    // `disable` never reads them.
    let off = PgConfig::new(
        "host=127.0.0.1 port=5432 user=root dbname=test sslmode=disable",
        "p",
    )
    .ssl_client_cert(&missing, &missing);
    assert!(off.connect().await.is_ok());
}

/// Percent-encode every byte outside the URL-safe unreserved set.
fn utf8_percent_encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
