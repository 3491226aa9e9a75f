//! A loopback server in the Hugging Face Hub's URL shape (feature `hub-server`), for tests of
//! model fetching.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The requests a [`hub_server`] saw: their paths, in order.
pub type HubRequests = Arc<Mutex<Vec<String>>>;

/// A loopback server in the Hub's URL shape: `GET /<owner>/<name>/resolve/main/<file>`
/// answers with the file from `dir` (honouring `Range`, with `ETag`, `X-Repo-Commit` and
/// `Content-Range` as the Hub sends them), 404 for a file it lacks, 500 for a file in
/// `broken` (or one it cannot read). Returns its base URL and the requests it saw. Runs on the
/// calling Tokio runtime.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() -> std::io::Result<()> {
/// let dir = tempfile::tempdir()?;
/// std::fs::write(dir.path().join("config.json"), "{}")?;
/// let (url, seen) = memloop_testkit::hub_server("org/model", dir.path().into(), &[]).await?;
/// assert!(url.starts_with("http://127.0.0.1:"));
/// assert!(seen.lock().unwrap().is_empty());
/// # Ok(()) }
/// ```
pub async fn hub_server(
    repo: &'static str,
    dir: PathBuf,
    broken: &'static [&'static str],
) -> std::io::Result<(String, HubRequests)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let url = format!("http://{}", listener.local_addr()?);
    let seen = HubRequests::default();
    let log = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let (dir, log) = (dir.clone(), log.clone());
            tokio::spawn(async move {
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&request).into_owned();
                let response = answer(repo, &dir, broken, &request, &log);
                let _ = socket.write_all(&response).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    Ok((url, seen))
}

/// The whole response to one request head, logged in `log`.
fn answer(
    repo: &str,
    dir: &Path,
    broken: &[&str],
    request: &str,
    log: &Mutex<Vec<String>>,
) -> Vec<u8> {
    let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
    if let Ok(mut log) = log.lock() {
        log.push(path.clone());
    }
    let range = request.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("range")
            .then(|| value.trim().to_owned())
    });
    let head = |status: &str, extra: &str, len: usize| {
        format!("HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n{extra}\r\n")
            .into_bytes()
    };
    let prefix = format!("/{repo}/resolve/main/");
    let Some(file) = path.strip_prefix(&prefix) else {
        return head("404 Not Found", "", 0);
    };
    if broken.contains(&file) {
        return head("500 Internal Server Error", "", 0);
    }
    if !dir.join(file).is_file() {
        return head("404 Not Found", "", 0);
    }
    let Ok(body) = std::fs::read(dir.join(file)) else {
        return head("500 Internal Server Error", "", 0);
    };
    let etag = format!("\"{:x}-{}\"", body.len(), file.len());
    let common =
        format!("ETag: {etag}\r\nX-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n");
    let range = range.and_then(|r| {
        let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
        Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))
    });
    let (mut out, part) = match range {
        Some((a, b)) => {
            let b = b.min(body.len().saturating_sub(1));
            let part = body.get(a.min(body.len())..=b).unwrap_or_default();
            let extra = format!("{common}Content-Range: bytes {a}-{b}/{}\r\n", body.len());
            (head("206 Partial Content", &extra, part.len()), part)
        }
        None => (head("200 OK", &common, body.len()), &body[..]),
    };
    out.extend_from_slice(part);
    out
}
