//! `context_search` with an embedder: the hybrid selector finds an entry that shares no word with
//! the query (the real all-MiniLM-L6-v2), and a failing embedder degrades to BM25 and says so.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

mod support;

use memloop_core::embed::Embedder;
use memloop_testkit::FakeEmbedder;
use serde_json::json;
use std::sync::Arc;
use support::{Fixture, call, connect, s, save};

fn minilm() -> Option<Arc<dyn Embedder>> {
    let ci = std::env::var("CI").is_ok_and(|v| !v.is_empty() && v != "0");
    let dir = std::env::var_os("MEMLOOP_TEST_MINILM_DIR")
        .map(std::path::PathBuf::from)
        .filter(|d| d.join("model.safetensors").is_file());
    match dir {
        Some(dir) => Some(Arc::new(
            memloop_candle::CandleEmbedder::load(&dir).unwrap(),
        )),
        None => {
            assert!(
                !ci,
                "CI: MEMLOOP_TEST_MINILM_DIR must name the all-MiniLM-L6-v2 dir"
            );
            eprintln!("skipping: MEMLOOP_TEST_MINILM_DIR is not set");
            None
        }
    }
}

#[tokio::test]
async fn hybrid_search_finds_an_entry_that_shares_no_word_with_the_query() {
    let Some(embedder) = minilm() else { return };
    let fx = Fixture::new();
    let mut config = fx.config();
    config.embedder = Some(embedder);
    let client = connect(config).await;
    let project = fx.project("app");
    save(
        &client,
        &project,
        json!([
            { "type": "knowledge", "title": "Release day", "content": "Deploys to production happen every Tuesday afternoon." },
            { "type": "knowledge", "title": "Lint", "content": "Run clippy with -D warnings before pushing." },
            { "type": "decision", "title": "Database", "content": "Use Postgres 16 for billing." },
        ]),
    )
    .await;
    let query = "which weekday do we ship new versions";
    let r = call(
        &client,
        "context_search",
        json!({ "project_path": s(&project), "query": query, "limit": 1 }),
    )
    .await;
    assert_eq!(r["mode"], "hybrid", "{r}");
    assert_eq!(r["results"][0]["path"], "knowledge/release-day.md", "{r}");
    let rel = r["results"][0]["relevance"].as_f64().unwrap();
    assert!((0.0..=1.0).contains(&rel));

    // BM25 alone does not find it: the query shares no word with the entry.
    let bm25 = connect(fx.config()).await;
    let r = call(
        &bm25,
        "context_search",
        json!({ "project_path": s(&project), "query": query, "limit": 1 }),
    )
    .await;
    assert_eq!(r["mode"], "bm25");
    assert_ne!(r["results"][0]["path"], "knowledge/release-day.md", "{r}");
}

#[tokio::test]
async fn a_failing_embedder_degrades_to_bm25_and_says_why() {
    let fx = Fixture::new();
    let mut config = fx.config();
    // An embedder whose backend is down.
    config.embedder = Some(Arc::new(
        FakeEmbedder::hashed(4)
            .with_model_id("down")
            .failing("connection refused"),
    ));
    let client = connect(config).await;
    let project = fx.project("app");
    save(
        &client,
        &project,
        json!([{ "type": "decision", "title": "Database", "content": "Use Postgres 16." }]),
    )
    .await;
    let r = call(
        &client,
        "context_search",
        json!({ "project_path": s(&project), "query": "postgres" }),
    )
    .await;
    assert_eq!(r["is_error"], false);
    assert_eq!(r["mode"], "bm25", "{r}");
    assert!(
        r["degraded_reason"]
            .as_str()
            .unwrap()
            .contains("connection refused"),
        "{r}"
    );
    assert_eq!(r["results"][0]["path"], "decisions/database.md");
}
