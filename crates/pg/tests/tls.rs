//! TLS to the machine's real PostgreSQL (`ssl = on` with Debian's snakeoil certificate, which
//! names `localhost`): every `sslmode`, `sslrootcert` in both URL forms and through the builder,
//! the errors of a refused certificate, and a full store round trip over TLS.
//!
//! Without the snakeoil certificate (another machine) the tests skip with a printed reason, and
//! fail under `CI=1`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_pg::{PgConfig, PgError, PgMemoryStore, SslMode};
use memloop_store::MemoryStore;
use std::path::{Path, PathBuf};
use support::TestSchema;

const SNAKEOIL: &str = "/etc/ssl/certs/ssl-cert-snakeoil.pem";
/// A password that must never show in an error (trust auth ignores it).
const PASSWORD: &str = "Пароль密码パスワード";

/// The snakeoil certificate, or `None` after reporting the skip (a failure under CI).
fn snakeoil() -> Option<PathBuf> {
    let path = PathBuf::from(SNAKEOIL);
    if std::fs::read(&path).is_ok() {
        return Some(path);
    }
    memloop_testkit::skip_unless_ci(format!(
        "{SNAKEOIL} is missing: the local PostgreSQL is expected to serve TLS with Debian's \
         snakeoil certificate (ssl-cert package, `ssl = on`)"
    ));
    None
}

fn kv(host: &str, extra: &str) -> String {
    format!("host={host} port=5432 user=root password='{PASSWORD}' dbname=test {extra}")
}

/// Whether the session of `client` is encrypted, as the server sees it.
async fn session_is_tls(client: &tokio_postgres::Client) -> bool {
    client
        .query_one(
            "select ssl from pg_stat_ssl where pid = pg_backend_pid()",
            &[],
        )
        .await
        .unwrap()
        .get(0)
}

async fn connect_ok(config: PgConfig) -> bool {
    let client = config.connect().await.unwrap();
    session_is_tls(&client).await
}

async fn connect_err(config: PgConfig) -> PgError {
    match config.connect().await {
        Ok(_) => panic!("connected, but the connection should have been refused"),
        Err(e) => e,
    }
}

/// A self-signed certificate for `localhost` that the server's certificate is not signed by.
fn foreign_root(dir: &Path) -> PathBuf {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let path = dir.join("чужой-корень.pem");
    std::fs::write(&path, cert.cert.pem()).unwrap();
    path
}

#[tokio::test]
async fn require_encrypts_without_verifying() {
    if snakeoil().is_none() {
        return;
    }
    // The snakeoil certificate does not name 127.0.0.1 and is trusted by nobody: `require`
    // does not care.
    let config = PgConfig::new(kv("127.0.0.1", "sslmode=require"), "p");
    assert_eq!(config.effective_ssl_mode().unwrap(), SslMode::Require);
    assert!(connect_ok(config).await);
    let url = "postgresql://root@127.0.0.1:5432/test?sslmode=require";
    assert!(connect_ok(PgConfig::new(url, "p")).await);
}

#[tokio::test]
async fn disable_is_plain_and_prefer_is_tls() {
    if snakeoil().is_none() {
        return;
    }
    assert!(!connect_ok(PgConfig::new(kv("127.0.0.1", "sslmode=disable"), "p")).await);
    assert!(connect_ok(PgConfig::new(kv("127.0.0.1", "sslmode=prefer"), "p")).await);
    // No sslmode: libpq's default, prefer.
    let default = PgConfig::new(kv("127.0.0.1", ""), "p");
    assert_eq!(default.effective_ssl_mode().unwrap(), SslMode::Prefer);
    assert!(connect_ok(default).await);
    // The builder wins over the URL.
    let forced = PgConfig::new(kv("127.0.0.1", "sslmode=require"), "p").ssl_mode(SslMode::Disable);
    assert!(!connect_ok(forced).await);
}

#[tokio::test]
async fn verify_ca_checks_the_chain_but_not_the_host_name() {
    let Some(root) = snakeoil() else { return };
    let url = kv(
        "127.0.0.1",
        &format!("sslmode=verify-ca sslrootcert={}", root.display()),
    );
    assert!(connect_ok(PgConfig::new(url, "p")).await);
    // The builder form.
    let config = PgConfig::new(kv("127.0.0.1", ""), "p")
        .ssl_mode(SslMode::VerifyCa)
        .ssl_root_cert(&root);
    assert!(connect_ok(config).await);
}

#[tokio::test]
async fn verify_ca_refuses_a_server_not_signed_by_the_root() {
    if snakeoil().is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let wrong = foreign_root(dir.path());
    let url = kv(
        "127.0.0.1",
        &format!("sslmode=verify-ca sslrootcert='{}'", wrong.display()),
    );
    let e = connect_err(PgConfig::new(url.clone(), "p")).await;
    let msg = e.to_string();
    assert!(matches!(e, PgError::Tls(_)), "{e:?}");
    assert!(msg.contains("not signed by the root certificate"), "{msg}");
    assert!(msg.contains("чужой-корень.pem"), "{msg}");
    assert!(!msg.contains(PASSWORD), "{msg}");
    // libpq's rule: `require` with a root certificate verifies the chain too.
    let url = url.replace("verify-ca", "require");
    assert!(matches!(
        connect_err(PgConfig::new(url, "p")).await,
        PgError::Tls(_)
    ));
    // Without a root file, verify-* trust the bundled Mozilla roots, which do not hold snakeoil.
    let e = connect_err(PgConfig::new(kv("localhost", "sslmode=verify-full"), "p")).await;
    assert!(e.to_string().contains("Mozilla root store"), "{e}");
}

#[tokio::test]
async fn verify_full_checks_the_host_name() {
    let Some(root) = snakeoil() else { return };
    let extra = format!("sslmode=verify-full sslrootcert={}", root.display());
    assert!(connect_ok(PgConfig::new(kv("localhost", &extra), "p")).await);
    let e = connect_err(PgConfig::new(kv("127.0.0.1", &extra), "p")).await;
    let msg = e.to_string();
    assert!(matches!(e, PgError::Tls(_)), "{e:?}");
    assert!(
        msg.contains("the server certificate does not name the host `127.0.0.1`"),
        "{msg}"
    );
    assert!(!msg.contains(PASSWORD), "{msg}");
    assert!(
        msg.contains("root@127.0.0.1:5432/test"),
        "names the server: {msg}"
    );
    // The store refuses to open, with the same error.
    let url = format!(
        "postgres://root:{}@127.0.0.1/test?sslmode=verify-full&sslrootcert={}",
        "%D0%9F%D0%B0%D1%80%D0%BE%D0%BB%D1%8C", // "Пароль", percent-encoded
        root.display()
    );
    let e = PgMemoryStore::open(PgConfig::new(url, "p"))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("does not name the host"), "{e}");
    assert!(!e.to_string().contains("%D0%9F"), "{e}");
    assert!(!e.to_string().contains("Пароль"), "{e}");
}

#[tokio::test]
async fn root_files_at_paths_in_every_script() {
    let Some(root) = snakeoil() else { return };
    let dir = tempfile::tempdir().unwrap();
    let sub = dir.path().join("证书 ルート 루트");
    std::fs::create_dir(&sub).unwrap();
    let copy = sub.join("корневой сертификат.pem");
    std::fs::copy(&root, &copy).unwrap();
    // Key=value: quoted, spaces and all.
    let url = kv(
        "localhost",
        &format!("sslmode=verify-full sslrootcert='{}'", copy.display()),
    );
    assert!(connect_ok(PgConfig::new(url, "p")).await);
    // URL: percent-encoded.
    let encoded: String = copy
        .display()
        .to_string()
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"/-_.".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    let url =
        format!("postgresql://root@localhost:5432/test?sslrootcert={encoded}&sslmode=verify-full");
    assert!(connect_ok(PgConfig::new(url, "p")).await);
    // A missing file is named, before any connection.
    let missing = sub.join("нет.pem");
    let e = PgMemoryStore::open(
        PgConfig::new(kv("localhost", "sslmode=verify-full"), "p").ssl_root_cert(&missing),
    )
    .await
    .unwrap_err();
    assert!(matches!(e, PgError::Tls(_)), "{e:?}");
    assert!(e.to_string().contains("证书 ルート 루트/нет.pem"), "{e}");
    // A bad sslmode is a clear URL error.
    let e = connect_err(PgConfig::new(kv("localhost", "sslmode=verify"), "p")).await;
    assert!(matches!(e, PgError::InvalidUrl(_)), "{e:?}");
    assert!(e.to_string().contains("verify-full"), "{e}");
}

#[tokio::test]
async fn the_store_round_trips_over_verified_tls() {
    let Some(root) = snakeoil() else { return };
    let schema = TestSchema::new();
    let app = format!("memloop_tls_{}", uuid::Uuid::new_v4().simple());
    let config = PgConfig::new(
        format!(
            "postgresql://root@localhost:5432/test?sslmode=verify-full&sslrootcert={}",
            root.display()
        ),
        "团队/チーム/팀/команда",
    )
    .schema(&schema.name)
    .application_name(&app)
    .writer("tls@test");
    let store = PgMemoryStore::open(config).await.unwrap();
    let mems = [
        (
            "zh.md",
            "主数据库",
            "数据库的选择",
            "我们决定使用PostgreSQL作为主数据库。",
        ),
        (
            "ja.md",
            "キャッシュ",
            "キャッシュの方針",
            "セッション情報はRedisにキャッシュする。",
        ),
        (
            "ko.md",
            "캐시 정책",
            "세션 캐시",
            "만료 시간은 삼십 분으로 정했다.",
        ),
        (
            "ru.md",
            "Резервные копии",
            "Резервное копирование",
            "Копирование каждую ночь.",
        ),
    ];
    support::write_memories(&store, &mems).await;
    for (rel, name, _, body) in mems {
        let file = store.read(rel).await.unwrap();
        assert_eq!(file.header.name.as_deref(), Some(name));
        assert_eq!(file.body.trim(), body);
    }
    for (query, want) in [
        ("数据库", "zh.md"),
        ("キャッシュ", "ja.md"),
        ("캐시", "ko.md"),
        ("копирование", "ru.md"),
    ] {
        let hits = store.search(query, 3, &[]).await.unwrap();
        assert_eq!(
            hits.first().map(|h| h.0.as_str()),
            Some(want),
            "{query}: {hits:?}"
        );
    }
    assert_eq!(store.scan().await.unwrap().len(), 4);
    // Every connection of the store's pool is encrypted, as the server sees it.
    let admin = support::admin().await;
    let rows = admin
        .query(
            "select s.ssl from pg_stat_ssl s join pg_stat_activity a using (pid) \
             where a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap();
    assert!(!rows.is_empty());
    assert!(
        rows.iter().all(|r| r.get::<_, bool>(0)),
        "{} rows",
        rows.len()
    );
}
