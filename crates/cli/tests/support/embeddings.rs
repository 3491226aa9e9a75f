//! Test support shared by the CLI test files (included with `#[path]`, not a test target).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

/// A loopback OpenAI-compatible `/v1/embeddings` server that embeds by concept word lists: a
/// deterministic stand-in for an embedding model, speaking the documented wire shape to the
/// real binary's HTTP client. Returns the base URL.
pub fn concept_embeddings_server() -> String {
    const CONCEPTS: [&[&str]; 3] = [
        &["release", "ship", "freeze", "merge"],
        &["database", "test"],
        &["latency", "grafana", "dashboard"],
    ];
    memloop_testkit::embeddings_server(|text| {
        let text = text.to_lowercase();
        let mut v: Vec<f32> = CONCEPTS
            .iter()
            .map(|ws| ws.iter().filter(|w| text.contains(*w)).count() as f32)
            .collect();
        v.push(0.1);
        v
    })
    .unwrap()
}
