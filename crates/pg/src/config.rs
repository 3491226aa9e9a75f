//! [`PgConfig`]: where the team store lives and which project it serves.

use crate::error::PgError;
use crate::tls::{MakeRustlsConnect, SslMode, split_tls_params};
use memloop_host::env::EnvVars;
use memloop_paths::origin_without_credentials;
use memloop_store::LocalBases;

/// Environment variable holding the team store's connection URL.
pub const DATABASE_URL_ENV: &str = "MEMLOOP_DATABASE_URL";

/// TLS mode, root certificate file, and client certificate + key files.
type TlsSettings = (
    SslMode,
    Option<std::path::PathBuf>,
    Option<(std::path::PathBuf, std::path::PathBuf)>,
);

/// How to open a [`PgMemoryStore`](crate::PgMemoryStore).
#[derive(Clone)]
pub struct PgConfig {
    /// Connection URL or key-value string (`postgres://user@host:5432/db`,
    /// `host=127.0.0.1 user=root dbname=test`).
    pub url: String,
    /// The project whose memories this store reads and writes (e.g. the repository's remote URL
    /// or slug). Rows of other projects are invisible to it.
    pub project_id: String,
    /// The id an older memloop gave this project (its dir's base name, when it has no git
    /// origin). When the database holds memories under it from before schema 6, the first
    /// project that opens with it claims them: they move to [`project_id`](Self::project_id),
    /// once, and the claim is recorded in `memloop_project_aliases`. `None`: nothing to claim.
    pub legacy_project_id: Option<String>,
    /// Who writes (recorded on every row), e.g. `user@machine`.
    pub writer: String,
    /// PostgreSQL schema holding the tables (created if missing). `None`: the role's default.
    pub schema: Option<String>,
    /// `application_name` of the store's connections (visible in `pg_stat_activity`).
    pub application_name: String,
    /// Pool size (connections).
    pub pool_size: usize,
    /// How many times an operation is retried on a fresh connection after a connection loss.
    pub retries: u32,
    /// Connect timeout. Four times it bounds how long
    /// [`PgMemoryStore::open`](crate::PgMemoryStore::open) keeps retrying connections lost
    /// while it migrates the schema (after [`retries`](Self::retries) attempts).
    pub connect_timeout: std::time::Duration,
    /// Where the store keeps what needs local disk (the vector cache, locks, pending work),
    /// keyed by its identity; from the process environment unless [`env`](Self::env) says
    /// otherwise.
    pub local_bases: LocalBases,
    /// TLS mode; `None`: the URL's `sslmode`, else [`SslMode::Prefer`] (libpq's default).
    pub ssl_mode: Option<SslMode>,
    /// Root certificate file (PEM) the `verify-ca`/`verify-full` modes trust; `None`: the URL's
    /// `sslrootcert`, else the bundled Mozilla roots (`webpki-roots`).
    pub ssl_root_cert: Option<std::path::PathBuf>,
    /// Client certificate chain and private key files (PEM) presented to a server that
    /// authenticates clients by certificate; `None`: the URL's `sslcert` and `sslkey`, else none.
    pub ssl_client_cert: Option<(std::path::PathBuf, std::path::PathBuf)>,
    /// What the write rules allow (the largest memory text, 1 MiB by default), the same rules
    /// as every store's ([`memloop_store::CheckedWrite`]).
    pub write: memloop_store::WriteLimits,
}

impl std::fmt::Debug for PgConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The URL may hold a password: never print it.
        f.debug_struct("PgConfig")
            .field("project_id", &self.project_id)
            .field("writer", &self.writer)
            .field("schema", &self.schema)
            .field("application_name", &self.application_name)
            .field("pool_size", &self.pool_size)
            .field("ssl_mode", &self.ssl_mode)
            .field("ssl_root_cert", &self.ssl_root_cert)
            .field("ssl_client_cert", &self.ssl_client_cert)
            .finish_non_exhaustive()
    }
}

impl PgConfig {
    /// The connection URL without its password (`postgres://user@host:port/db`), for logs and
    /// [`StoreDescription`](memloop_store::StoreDescription)s.
    pub fn redacted_url(&self) -> String {
        let Ok(c) = split_tls_params(&self.url)
            .map_err(|_| ())
            .and_then(|p| p.rest.parse::<tokio_postgres::Config>().map_err(|_| ()))
        else {
            return "postgres://(unparsable url)".into();
        };
        let hosts: Vec<String> = c
            .get_hosts()
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let host = match h {
                    tokio_postgres::config::Host::Tcp(h) => h.clone(),
                    #[allow(unreachable_patterns)]
                    other => format!("{other:?}"),
                };
                match c.get_ports().get(i).or(c.get_ports().first()) {
                    Some(port) => format!("{host}:{port}"),
                    None => host,
                }
            })
            .collect();
        format!(
            "postgres://{}@{}/{}",
            c.get_user().unwrap_or(""),
            hosts.join(","),
            c.get_dbname().unwrap_or("")
        )
    }

    /// The store's `db.namespace` in its statements' spans: the database (PostgreSQL's default,
    /// the user's name, when the URL names none), then `|schema` when the config names one.
    pub(crate) fn namespace(&self) -> String {
        let parsed = split_tls_params(&self.url)
            .ok()
            .and_then(|p| p.rest.parse::<tokio_postgres::Config>().ok());
        let database = parsed
            .as_ref()
            .and_then(|c| c.get_dbname().or(c.get_user()))
            .unwrap_or("")
            .to_owned();
        match &self.schema {
            Some(schema) => format!("{database}|{schema}"),
            None => database,
        }
    }

    /// A config for `project_id` at `url`, with defaults: writer from `USER`@hostname, default
    /// schema, `application_name` `memloop`, 4 connections, 3 retries, 5 s connect timeout,
    /// local dirs from the process environment (see [`env`](Self::env) to give another).
    pub fn new(url: impl Into<String>, project_id: impl Into<String>) -> Self {
        let env = EnvVars::from_process();
        Self {
            url: url.into(),
            project_id: project_id.into(),
            legacy_project_id: None,
            writer: writer_from(&env),
            schema: None,
            application_name: "memloop".into(),
            pool_size: 4,
            retries: 3,
            connect_timeout: std::time::Duration::from_secs(5),
            local_bases: LocalBases::from_env(&env),
            ssl_mode: None,
            ssl_root_cert: None,
            ssl_client_cert: None,
            write: memloop_store::WriteLimits::default(),
        }
    }

    /// The settings for the project at `project_dir`: its id from [`project_id_for`], and the
    /// id older versions gave it ([`legacy_project_id_for`]) so its memories follow it.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let config = memloop_pg::PgConfig::for_project_dir("host=127.0.0.1", dir.path());
    /// assert!(config.project_id.starts_with("dir:"));
    /// ```
    pub fn for_project_dir(url: impl Into<String>, project_dir: &std::path::Path) -> Self {
        let identity = ProjectIdentity::of(project_dir);
        let mut config = Self::new(url, identity.id);
        config.legacy_project_id = identity.legacy;
        config
    }

    /// Take the writer's user name (`USER`) and the local dirs' bases (`XDG_CACHE_HOME`,
    /// `XDG_STATE_HOME`, `HOME`: [`LocalBases`]) from `env` instead of the process environment
    /// (builder style), as a host that injects its environment does.
    pub fn env(mut self, env: &EnvVars) -> Self {
        self.writer = writer_from(env);
        self.local_bases = LocalBases::from_env(env);
        self
    }

    /// The URL from `MEMLOOP_DATABASE_URL` in `env`, if set and non-empty.
    ///
    /// ```
    /// use memloop_host::env::EnvVars;
    /// let env = EnvVars::from_pairs([("MEMLOOP_DATABASE_URL", "postgres://db/team")]);
    /// assert_eq!(memloop_pg::PgConfig::url_from_env(&env).as_deref(), Some("postgres://db/team"));
    /// ```
    pub fn url_from_env(env: &EnvVars) -> Option<String> {
        env.get(DATABASE_URL_ENV)
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
    }

    /// Set the schema (builder style).
    pub fn schema(mut self, schema: impl Into<String>) -> Self {
        self.schema = Some(schema.into());
        self
    }

    /// Set the writer name (builder style).
    pub fn writer(mut self, writer: impl Into<String>) -> Self {
        self.writer = writer.into();
        self
    }

    /// Set what the write rules allow (builder style), e.g. a server's smaller per-memory cap.
    pub fn write_limits(mut self, limits: memloop_store::WriteLimits) -> Self {
        self.write = limits;
        self
    }

    /// Set the `application_name` (builder style).
    pub fn application_name(mut self, name: impl Into<String>) -> Self {
        self.application_name = name.into();
        self
    }

    /// Set the pool size (builder style).
    pub fn pool_size(mut self, n: usize) -> Self {
        self.pool_size = n.max(1);
        self
    }

    /// Set the TLS mode, overriding the URL's `sslmode` (builder style).
    pub fn ssl_mode(mut self, mode: SslMode) -> Self {
        self.ssl_mode = Some(mode);
        self
    }

    /// Set the root certificate file (PEM, one or more certificates) the `verify-ca` and
    /// `verify-full` modes trust, overriding the URL's `sslrootcert` (builder style).
    pub fn ssl_root_cert(mut self, path: impl Into<std::path::PathBuf>) -> Self {
        self.ssl_root_cert = Some(path.into());
        self
    }

    /// Present this client certificate chain (`cert`, PEM, leaf first) and private key (`key`,
    /// PEM: PKCS#8, PKCS#1 or SEC1) to a server that authenticates clients by certificate,
    /// overriding the URL's `sslcert` / `sslkey` (builder style).
    pub fn ssl_client_cert(
        mut self,
        cert: impl Into<std::path::PathBuf>,
        key: impl Into<std::path::PathBuf>,
    ) -> Self {
        self.ssl_client_cert = Some((cert.into(), key.into()));
        self
    }

    /// The TLS mode in effect: [`PgConfig::ssl_mode`], else the URL's `sslmode`, else
    /// [`SslMode::Prefer`]. An unknown `sslmode` is an [`PgError::InvalidUrl`].
    ///
    /// ```
    /// use memloop_pg::{PgConfig, SslMode};
    /// let c = PgConfig::new("postgres://db.example.com/team?sslmode=verify-full", "p");
    /// assert_eq!(c.effective_ssl_mode().unwrap(), SslMode::VerifyFull);
    /// let c = PgConfig::new("host=db dbname=team", "p");
    /// assert_eq!(c.effective_ssl_mode().unwrap(), SslMode::Prefer);
    /// ```
    pub fn effective_ssl_mode(&self) -> Result<SslMode, PgError> {
        Ok(self.tls_settings()?.0)
    }

    /// Mode, root file and client certificate, from the fields or the URL.
    fn tls_settings(&self) -> Result<TlsSettings, PgError> {
        let params = split_tls_params(&self.url)?;
        let mode = match (self.ssl_mode, params.sslmode.as_deref()) {
            (Some(m), _) => m,
            (None, Some(s)) => SslMode::parse(s).ok_or_else(|| {
                PgError::InvalidUrl(format!(
                    "sslmode `{s}` is not one of disable, prefer, require, verify-ca, verify-full"
                ))
            })?,
            (None, None) => SslMode::Prefer,
        };
        let root = self
            .ssl_root_cert
            .clone()
            .or_else(|| params.sslrootcert.map(std::path::PathBuf::from));
        let client = match (&self.ssl_client_cert, params.sslcert, params.sslkey) {
            (Some(pair), _, _) => Some(pair.clone()),
            (None, Some(cert), Some(key)) => Some((cert.into(), key.into())),
            (None, None, None) => None,
            (None, Some(_), None) => {
                return Err(PgError::InvalidUrl(
                    "`sslcert` is set without `sslkey`: a client certificate needs its key".into(),
                ));
            }
            (None, None, Some(_)) => {
                return Err(PgError::InvalidUrl(
                    "`sslkey` is set without `sslcert`: a client key needs its certificate".into(),
                ));
            }
        };
        Ok((mode, root, client))
    }

    /// The driver config and the TLS connector for it.
    pub(crate) fn connection(
        &self,
    ) -> Result<(tokio_postgres::Config, MakeRustlsConnect), PgError> {
        let (mode, root, client) = self.tls_settings()?;
        let client = client
            .as_ref()
            .map(|(cert, key)| (cert.as_path(), key.as_path()));
        let tls = MakeRustlsConnect::new(mode, root.as_deref(), client)?;
        let mut cfg = self.driver_config()?;
        cfg.ssl_mode(tls.mode().driver());
        Ok((cfg, tls))
    }

    /// One connection with the store's URL, TLS settings, schema and application name, outside
    /// the store's pool (for administration and diagnostics: `select ssl from pg_stat_ssl where
    /// pid = pg_backend_pid()`). Its connection task runs on the current tokio runtime.
    pub async fn connect(&self) -> Result<tokio_postgres::Client, PgError> {
        let (cfg, tls) = self.connection()?;
        let (client, conn) = cfg
            .connect(tls)
            .await
            .map_err(|e| match PgError::from_db(&e) {
                PgError::ConnectionLost(m) | PgError::Connect(m) => {
                    PgError::Connect(format!("{m} (server: {})", self.redacted_url()))
                }
                PgError::Tls(m) => PgError::Tls(format!("{m} (server: {})", self.redacted_url())),
                other => other,
            })?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "team memory admin connection closed");
            }
        });
        Ok(client)
    }

    /// The driver config: URL parsed (without the TLS parameters, which [`Self::connection`]
    /// handles), schema, application name and timeout applied.
    fn driver_config(&self) -> Result<tokio_postgres::Config, PgError> {
        let mut cfg: tokio_postgres::Config = split_tls_params(&self.url)?
            .rest
            .parse()
            .map_err(|e: tokio_postgres::Error| PgError::InvalidUrl(e.to_string()))?;
        cfg.application_name(&self.application_name);
        cfg.connect_timeout(self.connect_timeout);
        if let Some(schema) = &self.schema {
            if !valid_ident(schema) {
                return Err(PgError::InvalidUrl(format!(
                    "schema `{schema}` must be letters, digits and `_`"
                )));
            }
            cfg.options(format!("-c search_path={schema}"));
        }
        Ok(cfg)
    }
}

/// A plain SQL identifier: ASCII letters, digits, `_`, not starting with a digit, at most 63.
pub(crate) fn valid_ident(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// `USER@hostname`, the default writer recorded on every row.
fn writer_from(env: &EnvVars) -> String {
    let user = env.get("USER").unwrap_or("memloop");
    let host = std::fs::read_to_string("/etc/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".into());
    format!("{user}@{host}")
}

/// The default team project id for a project dir: its git `origin` URL (the same on every
/// clone, so every machine lands in one project), else `dir:` and the dir's canonical path, so
/// two dirs of the same name never share memory.
pub fn project_id_for(project_dir: &std::path::Path) -> String {
    ProjectIdentity::of(project_dir).id
}

/// Which team project a project dir's memories live in, and why: one look at the dir (one `git`
/// run, one canonicalisation), the one place the id rule is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectIdentity {
    /// The team project id ([`project_id_for`]).
    pub id: String,
    /// The git origin the id is (credentials removed), when the dir has one: every checkout of
    /// it shares the id. `None`: the id is the dir's own (`dir:` and its canonical path).
    pub origin: Option<String>,
    /// The id older versions gave the dir ([`legacy_project_id_for`]), when it has no origin.
    pub legacy: Option<String>,
}

impl ProjectIdentity {
    /// The identity of the project at `project_dir`.
    ///
    /// ```
    /// let dir = tempfile::tempdir().unwrap();
    /// let identity = memloop_pg::ProjectIdentity::of(dir.path());
    /// assert!(identity.id.starts_with("dir:") && identity.origin.is_none());
    /// ```
    pub fn of(project_dir: &std::path::Path) -> Self {
        let canonical =
            std::fs::canonicalize(project_dir).unwrap_or_else(|_| project_dir.to_path_buf());
        let origin = git_origin(project_dir).map(|url| origin_without_credentials(&url));
        let legacy = match origin {
            Some(_) => None,
            None => canonical
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|id| validate_project_id(id).is_ok()),
        };
        let id = origin.clone().unwrap_or_else(|| dir_project_id(&canonical));
        Self { id, origin, legacy }
    }
}

/// The id memloop gave `project_dir` before project ids became unique (schema 6): its base
/// name, when it has no git `origin`. Memories stored under it are moved to
/// [`project_id_for`]'s id the first time the dir is opened (see
/// [`PgConfig::for_project_dir`]).
pub fn legacy_project_id_for(project_dir: &std::path::Path) -> Option<String> {
    ProjectIdentity::of(project_dir).legacy
}

/// The `remote.origin.url` of the repository at `dir`, if any.
fn git_origin(dir: &std::path::Path) -> Option<String> {
    std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["config", "--get", "remote.origin.url"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// `dir:<path>` for a dir without an origin; a path too long for an id, or with characters an
/// id may not hold, is named by its SHA-256 instead (`dir-sha256:<hex>`). Either way two dirs
/// never share an id.
fn dir_project_id(canonical: &std::path::Path) -> String {
    let id = format!("dir:{}", canonical.to_string_lossy());
    if validate_project_id(&id).is_ok() && !id.contains('\u{FFFD}') {
        return id;
    }
    use sha2::Digest;
    let digest = sha2::Sha256::digest(canonical.as_os_str().as_encoded_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("dir-sha256:{hex}")
}

/// The longest project id accepted, in characters.
pub const MAX_PROJECT_ID_CHARS: usize = 256;

/// The rule a team project id obeys: 1 to [`MAX_PROJECT_ID_CHARS`] characters, no leading or
/// trailing whitespace, no control characters (newlines, NUL, escapes), no `.` or `..` segment
/// between `/` or `\`. Letters of every script are welcome.
///
/// ```
/// use memloop_pg::validate_project_id;
/// assert!(validate_project_id("github.com/acme/api").is_ok());
/// assert!(validate_project_id("团队记忆/后端").is_ok());
/// assert!(validate_project_id("../x").is_err());
/// assert!(validate_project_id("a\nb").is_err());
/// assert!(validate_project_id(&"x".repeat(10_000)).is_err());
/// ```
pub fn validate_project_id(id: &str) -> Result<(), crate::PgError> {
    let bad = |why: &str| Err(crate::PgError::InvalidProject(why.to_owned()));
    if id.trim().is_empty() {
        return bad("the project id is empty");
    }
    if id.trim() != id {
        return bad("the project id starts or ends with whitespace");
    }
    if id.chars().count() > MAX_PROJECT_ID_CHARS {
        return bad(&format!(
            "the project id is longer than {MAX_PROJECT_ID_CHARS} characters"
        ));
    }
    if id.chars().any(char::is_control) {
        return bad("the project id contains a control character (newline, NUL, escape)");
    }
    if id.split(['/', '\\']).any(|seg| seg == "." || seg == "..") {
        return bad("the project id contains a `.` or `..` segment");
    }
    Ok(())
}

#[cfg(test)]
mod project_id_tests {
    use super::*;

    #[test]
    fn hostile_ids_are_refused_and_every_script_is_welcome() {
        for bad in [
            "",
            "   ",
            " lead",
            "trail ",
            "../x",
            "a/../b",
            "./x",
            "a\\..\\b",
            "line\nbreak",
            "nul\0",
            "esc\u{1b}[31m",
        ] {
            assert!(validate_project_id(bad).is_err(), "{bad:?}");
        }
        assert!(validate_project_id(&"x".repeat(MAX_PROJECT_ID_CHARS + 1)).is_err());
        for good in [
            "github.com/acme/api",
            "git@github.com:acme/api.git",
            "团队记忆",
            "チーム/バックエンド",
            "команда-api",
            "팀 메모리",
            "v1.2",
            "a..b",
        ] {
            assert!(validate_project_id(good).is_ok(), "{good:?}");
        }
        assert!(validate_project_id(&"记".repeat(MAX_PROJECT_ID_CHARS)).is_ok());
    }

    #[test]
    fn a_dir_without_an_origin_is_named_by_its_path() {
        assert_eq!(
            dir_project_id(std::path::Path::new("/work/app")),
            "dir:/work/app"
        );
    }

    #[test]
    fn dirs_of_the_same_name_get_different_ids() {
        let a = dir_project_id(std::path::Path::new("/srv/repos/proj-a"));
        let b = dir_project_id(std::path::Path::new("/srv/repos/payments-y/proj-a"));
        assert_ne!(a, b);
        for long in [
            format!("/srv/{}", "长".repeat(300)),
            "/srv/line\nbreak".to_owned(),
        ] {
            let id = dir_project_id(std::path::Path::new(&long));
            assert!(id.starts_with("dir-sha256:"), "{id}");
            assert!(validate_project_id(&id).is_ok());
        }
        let other = dir_project_id(std::path::Path::new(&format!("/srv/{}", "长".repeat(301))));
        assert_ne!(
            other,
            dir_project_id(std::path::Path::new(&format!("/srv/{}", "长".repeat(300))))
        );
        assert_eq!(
            dir_project_id(std::path::Path::new("/srv/команда")),
            "dir:/srv/команда"
        );
    }
}

#[cfg(test)]
mod redaction_tests {
    use super::*;

    #[test]
    fn no_url_form_leaks_its_password() {
        let cases = [
            ("postgres://alice:S3cr3t!@db.example.com/team", "S3cr3t!"),
            (
                "postgresql://alice:hunter2@db:5433/team?sslmode=require",
                "hunter2",
            ),
            ("postgres://alice@db/team?password=qwerty123", "qwerty123"),
            (
                "postgres://alice:Zz9secret@db/team?sslmode=verify-full&sslrootcert=/r.pem",
                "Zz9secret",
            ),
            (
                "host=db sslmode=verify-ca user=alice password='Пароль 1' dbname=team",
                "Пароль",
            ),
            ("postgres://alice:p%40ss%2Fw0rd@db/team", "p%40ss%2Fw0rd"),
            (
                "postgres://alice:%E5%AF%86%E7%A0%81123@db/team",
                "%E5%AF%86",
            ),
            (
                "host=db user=alice password=Tr0ub4dor dbname=team",
                "Tr0ub4dor",
            ),
            (
                "host=db user=alice password='密码 很长' dbname=team",
                "密码",
            ),
        ];
        for (url, secret) in cases {
            let shown = PgConfig::new(url, "p").redacted_url();
            assert!(!shown.contains(secret), "{url} -> {shown}");
            assert!(shown.contains("db"), "{url} -> {shown}: names the host");
            let debug = format!("{:?}", PgConfig::new(url, "p"));
            assert!(!debug.contains(secret), "{url} -> {debug}");
        }
    }
}
