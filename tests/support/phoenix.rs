//! An Arize Phoenix server for a test (`.ci/run` installs it and names its `phoenix` in
//! `MEMLOOP_PHOENIX`), shared by the facade's and the CLI's Phoenix tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A Phoenix server for one test: killed when dropped.
pub struct Phoenix {
    child: std::process::Child,
    /// Its base URL (`http://127.0.0.1:<port>`): OTLP/HTTP and the REST API.
    pub url: String,
    _dir: tempfile::TempDir,
}

impl Drop for Phoenix {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Phoenix {
    /// Start `$MEMLOOP_PHOENIX` (else `phoenix`) on free loopback ports with a temporary
    /// working dir and wait until it answers; `Err` saying why when it cannot be started.
    pub async fn start() -> Result<Phoenix, String> {
        let program = std::env::var("MEMLOOP_PHOENIX").unwrap_or_else(|_| "phoenix".into());
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let child = std::process::Command::new(&program)
            .arg("serve")
            .env("PHOENIX_WORKING_DIR", dir.path())
            .env("PHOENIX_HOST", "127.0.0.1")
            .env("PHOENIX_PORT", port.to_string())
            .env("PHOENIX_GRPC_PORT", free_port().to_string())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        let child = match child {
            Ok(c) => c,
            Err(e) => {
                return Err(format!(
                    "Arize Phoenix is not available (`.ci/run` installs it; MEMLOOP_PHOENIX={program}): {e}"
                ));
            }
        };
        let server = Phoenix {
            child,
            url: format!("http://127.0.0.1:{port}"),
            _dir: dir,
        };
        let http = reqwest::Client::new();
        // Phoenix takes some seconds to migrate its database and start.
        for _ in 0..240 {
            if let Ok(r) = http.get(format!("{}/healthz", server.url)).send().await
                && r.status().is_success()
            {
                return Ok(server);
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        panic!("Phoenix did not start on {}", server.url);
    }
}
