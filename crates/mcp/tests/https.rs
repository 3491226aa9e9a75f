//! `serve_http` over HTTPS: a self-signed certificate for `localhost` (rcgen), a full MCP
//! session over Streamable HTTP through a client trusting it, and the clients that must fail
//! (plain HTTP on the TLS port, a client that does not trust the certificate) without stopping
//! the server; unusable certificate and key files named at startup.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{HttpOptions, TlsIdentity, Tokens, check_bind};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{Fixture, s};
use tokio_util::sync::CancellationToken;

const TOKEN: &str = "https-token-0123456789";

/// A certificate for `localhost` and its key, as PEM files in a dir named in four scripts.
struct Cert {
    _dir: tempfile::TempDir,
    cert: PathBuf,
    key: PathBuf,
    pem: String,
}

fn localhost_cert() -> Cert {
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("证书 ключи キー 키");
    std::fs::create_dir(&sub).unwrap();
    let generated = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (sub.join("сертификат.pem"), sub.join("秘密鍵.pem"));
    let pem = generated.cert.pem();
    std::fs::write(&cert, &pem).unwrap();
    std::fs::write(&key, generated.signing_key.serialize_pem()).unwrap();
    Cert {
        _dir: dir,
        cert,
        key,
        pem,
    }
}

async fn start_tls(fx: &Fixture, cert: &Cert) -> support::HttpServer {
    let tls = TlsIdentity::load(&cert.cert, &cert.key).unwrap();
    support::start_http(fx, Some(Tokens::parse(TOKEN).unwrap()), Some(tls)).await
}

/// A client trusting exactly `pem` (not the public roots).
fn trusting(pem: &str) -> reqwest::Client {
    reqwest::Client::builder()
        .tls_built_in_root_certs(false)
        .add_root_certificate(reqwest::Certificate::from_pem(pem.as_bytes()).unwrap())
        .build()
        .unwrap()
}

/// One JSON-RPC message; the answer (JSON or the first SSE `data:` event) and the session id.
async fn rpc(
    client: &reqwest::Client,
    url: &str,
    session: Option<&str>,
    body: &Value,
) -> (reqwest::StatusCode, Option<String>, Option<Value>) {
    let mut req = client
        .post(url)
        .bearer_auth(TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .json(body);
    if let Some(sid) = session {
        req = req.header("mcp-session-id", sid);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let sid = resp
        .headers()
        .get("mcp-session-id")
        .map(|v| v.to_str().unwrap().to_owned());
    let text = resp.text().await.unwrap();
    let value = serde_json::from_str(&text).ok().or_else(|| {
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim)
            .find(|d| !d.is_empty())
            .and_then(|d| serde_json::from_str(d).ok())
    });
    (status, sid, value)
}

fn tool(id: u64, name: &str, args: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": name, "arguments": args}})
}

/// The structured answer of a tool call.
fn answer(v: &Value) -> &Value {
    assert_eq!(v["result"]["isError"], false, "{v}");
    &v["result"]["structuredContent"]
}

/// A whole MCP session over HTTPS: initialize, save in four scripts, search each back.
async fn session(client: &reqwest::Client, url: &str, project: &Path) {
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "https-test", "version": "0"}}});
    let (status, sid, reply) = rpc(client, url, None, &init).await;
    assert_eq!(status, 200);
    assert_eq!(reply.unwrap()["result"]["serverInfo"]["name"], "memloop");
    // Without sessions the server names none: every request stands alone.
    assert_eq!(sid, None);
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, _, _) = rpc(client, url, sid.as_deref(), &initialized).await;
    assert!(status.is_success(), "{status}");
    let entries = json!([
        {"type": "decision", "title": "数据库", "content": "我们决定使用PostgreSQL作为主数据库。"},
        {"type": "knowledge", "title": "キャッシュ", "content": "セッション情報はRedisにキャッシュする。"},
        {"type": "knowledge", "title": "캐시 정책", "content": "만료 시간은 삼십 분으로 정했다."},
        {"type": "knowledge", "title": "Резервные копии", "content": "Копирование выполняется каждую ночь."},
    ]);
    let (_, _, saved) = rpc(
        client,
        url,
        sid.as_deref(),
        &tool(
            1,
            "context_save",
            json!({"project_path": s(project), "entries": entries}),
        ),
    )
    .await;
    assert_eq!(answer(&saved.unwrap())["written"], 4);
    for (i, (query, title)) in [
        ("数据库", "数据库"),
        ("キャッシュ", "キャッシュ"),
        ("캐시", "캐시 정책"),
        ("копии", "Резервные копии"),
    ]
    .into_iter()
    .enumerate()
    {
        let (_, _, found) = rpc(
            client,
            url,
            sid.as_deref(),
            &tool(
                10 + i as u64,
                "context_search",
                json!({"project_path": s(project), "query": query}),
            ),
        )
        .await;
        let found = found.unwrap();
        assert_eq!(
            answer(&found)["results"][0]["title"],
            title,
            "{query}: {found}"
        );
    }
}

#[tokio::test]
async fn a_trusting_client_runs_a_session_over_https() {
    let fx = Fixture::new();
    let project = fx.project("团队项目");
    let cert = localhost_cert();
    let server = start_tls(&fx, &cert).await;
    let url = format!("https://localhost:{}/mcp", server.addr.port());
    session(&trusting(&cert.pem), &url, &project).await;
}

#[tokio::test]
async fn failed_handshakes_do_not_stop_the_server() {
    let fx = Fixture::new();
    let project = fx.project("проект");
    let cert = localhost_cert();
    let server = start_tls(&fx, &cert).await;
    let port = server.addr.port();
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});

    // Plain HTTP on the TLS port: no HTTP answer, the connection fails.
    let plain = reqwest::Client::new()
        .post(format!("http://localhost:{port}/mcp"))
        .bearer_auth(TOKEN)
        .header("Accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await;
    assert!(plain.is_err(), "plain HTTP got an answer: {plain:?}");

    // A client that trusts only the public roots refuses the self-signed certificate.
    let untrusting = reqwest::Client::new()
        .post(format!("https://localhost:{port}/mcp"))
        .json(&init)
        .send()
        .await
        .unwrap_err();
    let chain = error_chain(&untrusting);
    assert!(
        chain.contains("certificate") || chain.contains("UnknownIssuer"),
        "{chain}"
    );

    // A client trusting another certificate refuses it too.
    let other = localhost_cert();
    assert!(
        trusting(&other.pem)
            .post(format!("https://localhost:{port}/mcp"))
            .json(&init)
            .send()
            .await
            .is_err()
    );

    // A client that connects and closes mid-handshake.
    let mut raw = tokio::net::TcpStream::connect(server.addr).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut raw, b"\x16\x03\x01\x00\x05garbage")
        .await
        .unwrap();
    drop(raw);

    // The server still serves a client that trusts it.
    session(
        &trusting(&cert.pem),
        &format!("https://localhost:{port}/mcp"),
        &project,
    )
    .await;
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        out.push_str(&format!(": {s}"));
        source = s.source();
    }
    out
}

#[test]
fn unusable_certificate_and_key_files_are_named() {
    let cert = localhost_cert();
    let dir = cert.cert.parent().unwrap();
    let err = |c: &Path, k: &Path| TlsIdentity::load(c, k).unwrap_err().to_string();

    let missing = dir.join("нет.pem");
    let e = err(&missing, &cert.key);
    assert!(
        e.contains("certificate file") && e.contains("нет.pem"),
        "{e}"
    );
    let e = err(&cert.cert, &missing);
    assert!(e.contains("key file") && e.contains("нет.pem"), "{e}");

    // A key where the certificate belongs, a certificate where the key belongs.
    let e = err(&cert.key, &cert.key);
    assert!(
        e.contains("秘密鍵.pem") && e.contains("no certificate"),
        "{e}"
    );
    let e = err(&cert.cert, &cert.cert);
    assert!(
        e.contains("сертификат.pem") && e.contains("no usable private key"),
        "{e}"
    );

    // A key of another certificate.
    let other = localhost_cert();
    let e = err(&cert.cert, &other.key);
    assert!(
        e.contains("秘密鍵.pem") && e.contains("cannot serve together"),
        "{e}"
    );

    // Never the key material in Debug.
    let id = TlsIdentity::load(&cert.cert, &cert.key).unwrap();
    assert!(!format!("{id:?}").contains("PRIVATE"));
}

#[test]
fn a_network_bind_warns_about_plain_http_only() {
    let cert = localhost_cert();
    let options = |tls: Option<TlsIdentity>| HttpOptions {
        addr: "0.0.0.0:8765".parse().unwrap(),
        tokens: Some(Tokens::parse(TOKEN).unwrap()),
        insecure_no_auth: false,
        tls,
        shutdown: CancellationToken::new(),
        sessions: None,
        limits: Default::default(),
        body_timeout: memloop_mcp::BODY_READ_TIMEOUT,
    };
    let plain = check_bind(&options(None)).unwrap();
    assert!(plain.unwrap().contains("plain HTTP"));
    let tls = TlsIdentity::load(&cert.cert, &cert.key).unwrap();
    assert_eq!(check_bind(&options(Some(tls))).unwrap(), None);
}

#[tokio::test]
async fn the_python_sdk_talks_https_when_it_trusts_the_certificate() {
    let python = std::env::var("MEMLOOP_MCP_PYTHON").unwrap_or_else(|_| "python3".into());
    let probe = std::process::Command::new(&python)
        .args(["-c", "import mcp.client.streamable_http"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        memloop_testkit::skip_unless_ci(format!(
            "the MCP Python SDK is not available (`.ci/run` installs it; MEMLOOP_MCP_PYTHON={python})"
        ));
        return;
    }
    let fx = Fixture::new();
    let project = fx.project("团队项目");
    let cert = localhost_cert();
    let server = start_tls(&fx, &cert).await;
    let url = format!("https://localhost:{}/mcp", server.addr.port());
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/http_session.py");
    let run = |ca: Option<&Path>| {
        let mut cmd = tokio::process::Command::new(&python);
        cmd.arg(&script).arg(&url).arg(TOKEN).arg(s(&project));
        // httpx (the SDK's HTTP client) trusts the file SSL_CERT_FILE names.
        match ca {
            Some(ca) => cmd.env("SSL_CERT_FILE", ca),
            None => cmd.env_remove("SSL_CERT_FILE"),
        };
        cmd.env_remove("SSL_CERT_DIR").output()
    };
    let out = run(Some(&cert.cert)).await.unwrap();
    assert!(
        out.status.success(),
        "python client failed:\nstdout: {}\nstderr: {}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("all checks passed"));
    // Trusting only its default roots, the SDK refuses the certificate.
    let out = run(None).await.unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("CERTIFICATE_VERIFY_FAILED"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
