//! `hub_server` answers as the Hugging Face Hub does: whole files with their ETag and commit,
//! byte ranges, 404 for a missing file or repository, 500 for a broken one; and it logs paths.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_testkit::hub_server;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// The whole answer to `GET path` with the extra header lines `headers`.
async fn get(url: &str, path: &str, headers: &str) -> String {
    let mut stream = tokio::net::TcpStream::connect(url.trim_start_matches("http://"))
        .await
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: hub\r\n{headers}\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await.unwrap();
    answer
}

#[tokio::test]
async fn files_ranges_and_failures_are_answered_as_the_hub_does() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("config.json"), "0123456789").unwrap();
    std::fs::write(dir.path().join("tokenizer.json"), "{}").unwrap();
    let (url, seen) = hub_server("org/model", dir.path().into(), &["tokenizer.json"])
        .await
        .unwrap();

    let whole = get(&url, "/org/model/resolve/main/config.json", "").await;
    assert!(whole.starts_with("HTTP/1.1 200 OK\r\n"), "{whole}");
    assert!(whole.contains("Content-Length: 10\r\n"), "{whole}");
    assert!(whole.contains("ETag: \"a-11\"\r\n"), "{whole}");
    assert!(whole.contains("X-Repo-Commit: "), "{whole}");
    assert!(whole.ends_with("\r\n\r\n0123456789"), "{whole}");

    let part = get(
        &url,
        "/org/model/resolve/main/config.json",
        "Range: bytes=2-4\r\n",
    )
    .await;
    assert!(
        part.starts_with("HTTP/1.1 206 Partial Content\r\n"),
        "{part}"
    );
    assert!(part.contains("Content-Range: bytes 2-4/10\r\n"), "{part}");
    assert!(part.ends_with("\r\n\r\n234"), "{part}");

    let past_end = get(
        &url,
        "/org/model/resolve/main/config.json",
        "Range: bytes=8-99\r\n",
    )
    .await;
    assert!(
        past_end.contains("Content-Range: bytes 8-9/10\r\n"),
        "{past_end}"
    );
    assert!(past_end.ends_with("\r\n\r\n89"), "{past_end}");

    let broken = get(&url, "/org/model/resolve/main/tokenizer.json", "").await;
    assert!(broken.starts_with("HTTP/1.1 500 "), "{broken}");
    let missing = get(&url, "/org/model/resolve/main/model.safetensors", "").await;
    assert!(missing.starts_with("HTTP/1.1 404 "), "{missing}");
    let other_repo = get(&url, "/org/other/resolve/main/config.json", "").await;
    assert!(other_repo.starts_with("HTTP/1.1 404 "), "{other_repo}");

    assert_eq!(
        seen.lock().unwrap().as_slice(),
        [
            "/org/model/resolve/main/config.json",
            "/org/model/resolve/main/config.json",
            "/org/model/resolve/main/config.json",
            "/org/model/resolve/main/tokenizer.json",
            "/org/model/resolve/main/model.safetensors",
            "/org/other/resolve/main/config.json",
        ]
    );
}
