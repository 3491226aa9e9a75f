//! Team servers as real processes (the built `memloop` binary, `memloop mcp --http` on a
//! PostgreSQL schema of the test's own) and HAProxy in front of them (included with `#[path]`,
//! not a test target).
#![allow(dead_code)]

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

pub const BIN: &str = env!("CARGO_BIN_EXE_memloop");
pub const PG: &str = "host=127.0.0.1 port=5432 user=root dbname=test";

/// A schema of its own on the machine's PostgreSQL, dropped when the test ends.
pub struct Schema {
    pub name: String,
}

impl Schema {
    pub async fn new(prefix: &str) -> Self {
        let name = format!(
            "memloop_{prefix}_{}_{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        );
        admin()
            .await
            .batch_execute(&format!("CREATE SCHEMA {name}"))
            .await
            .unwrap();
        Self { name }
    }

    /// The database URL whose connections work in this schema.
    pub fn url(&self) -> String {
        format!("{PG} options='-c search_path={}'", self.name)
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name);
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async { admin().await.batch_execute(&sql).await })
        })
        .join();
    }
}

/// A connection to the test database, outside any test schema.
pub async fn admin() -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(PG, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c
}

/// One `memloop mcp --http` process.
pub struct Server {
    pub child: Child,
    pub addr: SocketAddr,
}

impl Server {
    /// Start the binary on `addr` (port 0: any) serving projects under `root` from the
    /// database at `url`, and wait for its "serving" line.
    pub async fn start(url: &str, root: &Path, home: &Path, addr: SocketAddr) -> Self {
        Self::start_with(url, root, home, addr, &[]).await
    }

    /// [`Server::start`] with more `memloop mcp` arguments (a token file, limits).
    pub async fn start_with(
        url: &str,
        root: &Path,
        home: &Path,
        addr: SocketAddr,
        extra: &[&str],
    ) -> Self {
        Self::start_with_env(url, root, home, addr, extra, &[]).await
    }

    /// [`Server::start_with`] with more environment variables (an OTLP endpoint).
    pub async fn start_with_env(
        url: &str,
        root: &Path,
        home: &Path,
        addr: SocketAddr,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Self {
        let mut child = Command::new(BIN)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home)
            .env("MEMLOOP_HOME", home.join("base"))
            .env("MEMLOOP_DATABASE_URL", url)
            .env("MEMLOOP_LOG", "warn")
            .envs(env.iter().copied())
            .arg("--project")
            .arg(root)
            .arg("mcp")
            .arg("--root")
            .arg(root)
            .arg("--http")
            .arg(addr.to_string())
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut said = Vec::new();
        let addr = loop {
            let Some(line) = lines.next_line().await.unwrap() else {
                panic!("server exited before serving:\n{}", said.join("\n"));
            };
            if let Some(rest) = line.strip_prefix("memloop: serving MCP on http://") {
                break rest.trim_end_matches("/mcp").parse().unwrap();
            }
            said.push(line);
        };
        // Keep draining stderr so the server never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self { child, addr }
    }

    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stop it as an operator does (SIGTERM) and wait until it has exited: it finishes what it
    /// was doing and flushes its spans first.
    pub async fn terminate(&mut self) -> std::process::ExitStatus {
        let pid = self.child.id().unwrap();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status()
            .unwrap();
        assert!(sent.success());
        self.child.wait().await.unwrap()
    }

    /// The `application_name` of its database connections.
    pub fn app_name(&self) -> String {
        format!("memloop-mcp:{}", self.child.id().unwrap_or(0))
    }
}

/// A free loopback port (bound, then released: HAProxy binds it next).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// HAProxy (Debian's `haproxy`) in front of replicas: round-robin per request, `/health`
/// checked every 100 ms, a request whose connection to a replica fails sent to the next one,
/// and the replica that answered named in `X-Replica`.
pub struct Haproxy {
    child: Child,
    pub addr: SocketAddr,
    pub log: PathBuf,
}

/// Whether HAProxy is installed (`.ci/run` installs it).
pub fn haproxy_available() -> bool {
    std::process::Command::new("haproxy")
        .arg("-v")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// A TCP proxy to `upstream` that loses every answer: it passes each request on, waits until the
/// server starts answering (so the request was carried out) and then closes the client's
/// connection without a byte of the answer, as a replica killed between its commit and its
/// reply would. Its address.
pub async fn answer_dropper(upstream: SocketAddr) -> SocketAddr {
    use tokio::io::AsyncReadExt;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(upstream).await else {
                    return;
                };
                let (mut client_read, _client_write) = client.into_split();
                let (mut server_read, mut server_write) = server.into_split();
                let forward = tokio::spawn(async move {
                    let _ = tokio::io::copy(&mut client_read, &mut server_write).await;
                });
                let mut first = [0u8; 1];
                let _ = server_read.read(&mut first).await;
                forward.abort();
                // Dropping both halves closes the client's connection unanswered.
            });
        }
    });
    addr
}

/// A backend of [`Haproxy`]: where requests go, and where its health is checked (the same
/// server unless a proxy such as [`answer_dropper`] stands in front of it).
#[derive(Debug, Clone, Copy)]
pub struct Backend {
    pub traffic: SocketAddr,
    pub health: SocketAddr,
}

impl From<SocketAddr> for Backend {
    fn from(addr: SocketAddr) -> Self {
        Self {
            traffic: addr,
            health: addr,
        }
    }
}

impl Haproxy {
    /// Start HAProxy in the foreground with a configuration written under `dir`.
    pub async fn start(dir: &Path, backends: &[Backend]) -> Self {
        let port = free_port();
        let servers: String = backends
            .iter()
            .enumerate()
            .map(|(i, b)| {
                format!(
                    "    server r{i} {} check addr {} port {}\n",
                    b.traffic,
                    b.health.ip(),
                    b.health.port()
                )
            })
            .collect();
        let config = format!(
            "global\n\
             \x20   maxconn 2000\n\
             defaults\n\
             \x20   mode http\n\
             \x20   timeout connect 1s\n\
             \x20   timeout client 60s\n\
             \x20   timeout server 60s\n\
             \x20   retries 3\n\
             \x20   option redispatch 1\n\
             \x20   retry-on conn-failure\n\
             frontend mcp\n\
             \x20   bind 127.0.0.1:{port}\n\
             \x20   default_backend replicas\n\
             backend replicas\n\
             \x20   balance roundrobin\n\
             \x20   option httpchk GET /health\n\
             \x20   http-check expect status 200\n\
             \x20   timeout check 2s\n\
             \x20   default-server inter 100ms fall 2 rise 2\n\
             \x20   http-response set-header X-Replica %s\n\
             {servers}"
        );
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let log = dir.join("haproxy.log");
        let child = Command::new("haproxy")
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(dir.join("haproxy.err")).unwrap())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let me = Self { child, addr, log };
        // Ready when a request through it reaches a replica's `/health`.
        let http = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(r) = http.get(format!("http://{addr}/health")).send().await
                && r.status().is_success()
            {
                return me;
            }
            tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        }
        panic!(
            "HAProxy did not come up: {}",
            std::fs::read_to_string(dir.join("haproxy.err")).unwrap_or_default()
        );
    }

    /// The MCP endpoint through HAProxy.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
