//! A real Arize Phoenix server for a test (feature `phoenix`).

use serde_json::Value;
use std::time::Duration;

/// A Phoenix server for one test, on free loopback ports with a temporary working dir; killed
/// when dropped. The program is `$MEMLOOP_PHOENIX` (CI installs Phoenix into a virtualenv and
/// names its `phoenix` there), else `phoenix` on the `PATH`.
///
/// ```no_run
/// # #[tokio::main] async fn main() {
/// use memloop_testkit::{Phoenix, skip_unless_ci};
///
/// let phoenix = match Phoenix::start().await {
///     Ok(p) => p,
///     Err(why) => return skip_unless_ci(why),
/// };
/// // Export spans to `phoenix.url` (OTLP/HTTP), then read them back:
/// let spans = phoenix
///     .spans_until("my-project", |spans| !spans.is_empty())
///     .await
///     .unwrap();
/// # }
/// ```
pub struct Phoenix {
    child: std::process::Child,
    /// Its base URL (`http://127.0.0.1:<port>`): OTLP/HTTP and the REST API.
    pub url: String,
    http: reqwest::Client,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A free loopback port.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("no free loopback port: {e}"))
}

/// How long Phoenix may take to migrate its database and answer: 240 polls, 500 ms apart.
const START_POLLS: u32 = 240;
/// How long its spans may take to be readable: 120 polls, 500 ms apart.
const SPAN_POLLS: u32 = 120;
const POLL: Duration = Duration::from_millis(500);

impl Phoenix {
    /// Start Phoenix and wait until it answers its health check. `Err` says why when it cannot
    /// be started (not installed: pass it to [`skip_unless_ci`](crate::skip_unless_ci)) or did
    /// not answer in two minutes.
    pub async fn start() -> Result<Phoenix, String> {
        let program = std::env::var("MEMLOOP_PHOENIX").unwrap_or_else(|_| "phoenix".into());
        let dir = tempfile::tempdir().map_err(|e| format!("no temp dir for Phoenix: {e}"))?;
        let port = free_port()?;
        let child = std::process::Command::new(&program)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port()?.to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| {
                format!(
                    "Arize Phoenix is not available (CI installs it; MEMLOOP_PHOENIX={program}): {e}"
                )
            })?;
        let server = Phoenix {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            _dir: dir,
        };
        for _ in 0..START_POLLS {
            if let Ok(r) = server
                .http
                .get(format!("{}/healthz", server.url))
                .send()
                .await
                && r.status().is_success()
            {
                return Ok(server);
            }
            tokio::time::sleep(POLL).await;
        }
        Err(format!("Phoenix did not start on {}", server.url))
    }

    /// The spans of `project` (up to 1,000) read through the REST API, once `done` says they
    /// are all there (Phoenix writes spans asynchronously), or as they are after a minute of
    /// polling, for the test's assertions to say what is missing. `Err` when the API cannot be
    /// reached or answers with something that is not JSON.
    pub async fn spans_until(
        &self,
        project: &str,
        done: impl Fn(&[Value]) -> bool,
    ) -> Result<Vec<Value>, String> {
        let url = format!("{}/v1/projects/{project}/spans?limit=1000", self.url);
        let mut spans = Vec::new();
        for _ in 0..SPAN_POLLS {
            let r = self
                .http
                .get(&url)
                .send()
                .await
                .map_err(|e| format!("GET {url}: {e}"))?;
            // Before the first span arrives the project does not exist yet: not found.
            if r.status().is_success() {
                let v: Value = r.json().await.map_err(|e| format!("GET {url}: {e}"))?;
                spans = v["data"].as_array().cloned().unwrap_or_default();
                if done(&spans) {
                    break;
                }
            }
            tokio::time::sleep(POLL).await;
        }
        Ok(spans)
    }
}
