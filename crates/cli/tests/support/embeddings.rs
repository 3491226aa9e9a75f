//! Test support shared by the CLI test files (included with `#[path]`, not a test target).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::Write;

/// A loopback OpenAI-compatible `/v1/embeddings` server (a thread on an ephemeral port) that
/// embeds by concept word lists: a deterministic stand-in for an embedding model, speaking the
/// documented wire shape to the real binary's HTTP client. Returns the base URL.
pub fn concept_embeddings_server() -> String {
    const CONCEPTS: [&[&str]; 3] = [
        &["release", "ship", "freeze", "merge"],
        &["database", "test"],
        &["latency", "grafana", "dashboard"],
    ];
    embeddings_server(|text| {
        let text = text.to_lowercase();
        let mut v: Vec<f32> = CONCEPTS
            .iter()
            .map(|ws| ws.iter().filter(|w| text.contains(*w)).count() as f32)
            .collect();
        v.push(0.1);
        v
    })
}

/// A loopback `/v1/embeddings` server in the documented wire shape whose vector for each input
/// text is `embed(text)`. Returns the base URL (with `/v1`).
pub fn embeddings_server(embed: impl Fn(&str) -> Vec<f32> + Send + 'static) -> String {
    let url = json_server(move |request: Value| {
        let data: Vec<Value> = request["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let v = embed(text.as_str().unwrap());
                serde_json::json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        serde_json::json!({"object": "list", "data": data, "model": request["model"]})
    });
    format!("{url}/v1")
}

/// A loopback HTTP server (a thread on an ephemeral port) that answers every POST with the JSON
/// `answer` returns for the request's JSON body. Returns `http://127.0.0.1:<port>`.
pub fn json_server(answer: impl Fn(Value) -> Value + Send + 'static) -> String {
    use std::io::{BufRead, BufReader, Read};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { continue };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            let mut line = String::new();
            while reader.read_line(&mut line).unwrap_or(0) > 0 && line != "\r\n" {
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    length = v.trim().parse().unwrap_or(0);
                }
                line.clear();
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let request: Value = serde_json::from_slice(&body).unwrap();
            let answer = answer(request).to_string();
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{answer}",
                answer.len()
            );
        }
    });
    url
}
