//! A loopback server in the Hugging Face Hub's URL shape, for fetching tests (memloop-candle's
//! and the CLI's `models fetch`, which includes this file by path).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A loopback server in the Hub's URL shape: `GET /<owner>/<name>/resolve/main/<file>`
/// answers with the file from `dir` (honouring `Range`, with `ETag`, `X-Repo-Commit` and
/// `Content-Range` as the Hub sends them), 404 for a file it lacks, 500 for a file in
/// `broken`. Returns its base URL and the requests it saw.
pub async fn hub_server(
    repo: &'static str,
    dir: PathBuf,
    broken: &'static [&'static str],
) -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
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
                let path = request.split_whitespace().nth(1).unwrap_or("").to_owned();
                log.lock().unwrap().push(path.clone());
                let range = request.lines().find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("range")
                        .then(|| value.trim().to_owned())
                });
                let prefix = format!("/{repo}/resolve/main/");
                let file = path.strip_prefix(&prefix).map(str::to_owned);
                let head = |status: &str, extra: &str, len: usize| {
                    format!(
                        "HTTP/1.1 {status}\r\nContent-Length: {len}\r\nConnection: close\r\n{extra}\r\n"
                    )
                };
                let response = match file {
                    Some(f) if broken.contains(&f.as_str()) => {
                        head("500 Internal Server Error", "", 0).into_bytes()
                    }
                    Some(f) if dir.join(&f).is_file() => {
                        let body = std::fs::read(dir.join(&f)).unwrap();
                        let etag = format!("\"{:x}-{}\"", body.len(), f.len());
                        let common = format!(
                            "ETag: {etag}\r\nX-Repo-Commit: 0123456789abcdef0123456789abcdef01234567\r\n"
                        );
                        match range.and_then(|r| {
                            let (a, b) = r.strip_prefix("bytes=")?.split_once('-')?;
                            Some((a.parse::<usize>().ok()?, b.parse::<usize>().ok()?))
                        }) {
                            Some((a, b)) => {
                                let b = b.min(body.len().saturating_sub(1));
                                let part = &body[a.min(body.len())..=b];
                                let extra = format!(
                                    "{common}Content-Range: bytes {a}-{b}/{}\r\n",
                                    body.len()
                                );
                                let mut out =
                                    head("206 Partial Content", &extra, part.len()).into_bytes();
                                out.extend_from_slice(part);
                                out
                            }
                            None => {
                                let mut out = head("200 OK", &common, body.len()).into_bytes();
                                out.extend_from_slice(&body);
                                out
                            }
                        }
                    }
                    _ => head("404 Not Found", "", 0).into_bytes(),
                };
                let _ = socket.write_all(&response).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    (url, seen)
}
