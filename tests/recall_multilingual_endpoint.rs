//! Semantic recall across languages through the OpenAI-compatible embeddings client: the
//! supported path for memories that are not in English (a multilingual model such as bge-m3 or
//! multilingual-e5 served by Ollama, llama.cpp `--embedding` or vLLM), end to end from
//! `HybridSelector` through `OpenAiEmbedder` and real HTTP to a server.
//!
//! **The server is a loopback stand-in for a multilingual model, not a model**: a wiremock
//! server speaking the documented `/v1/embeddings` wire shape (request `{"model", "input": [...]}`,
//! response `{"data": [{"embedding", "index"}], "model", "usage"}`) whose vectors come from a
//! small cross-lingual concept table, so "数据库", "database", "データベース" and "база данных"
//! land close the way they do with a multilingual model. What is tested is memloop's side: the
//! texts it sends (NFKC, each in its own script, neither transliterated nor escaped), the
//! cross-lingual ranking the fusion makes of such vectors, and the fall-back to BM25 with
//! `RecallEvent::RecallDegraded` when the server fails or answers with the wrong dimension.
#![cfg(feature = "providers")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemoryStore;
use memloop::Selector;
use memloop::core::embed::Embedder;
use memloop::core::events::{AgentEvent, VecSink};
use memloop::memory::files::FileMemoryStore;
use memloop::memory::recall::RecallEvent;
use memloop::memory::recall::{HybridConfig, HybridSelector, SelectionContext, vector_cache_for};
use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
use memloop::providers::{OpenAiEmbedConfig, OpenAiEmbedder, RetryPolicy};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// One concept per row, in the four scripts (and English): what a multilingual model puts
/// close together.
const CONCEPTS: [&[&str]; 4] = [
    &[
        "database",
        "数据库",
        "データベース",
        "база данных",
        "데이터베이스",
    ],
    &["cache", "缓存", "キャッシュ", "кэш", "캐시"],
    &["backup", "备份", "バックアップ", "резервн", "백업"],
    &["deploy", "部署", "デプロイ", "развёртыван", "배포"],
];

const NORMAL: u8 = 0;
const FAIL: u8 = 1;
const WRONG_DIMENSION: u8 = 2;

/// Answers `/v1/embeddings` from [`CONCEPTS`]; `mode` makes it fail (HTTP 500) or answer with
/// vectors one shorter than before.
struct ConceptServer {
    mode: Arc<AtomicU8>,
}

impl Respond for ConceptServer {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let mode = self.mode.load(Ordering::SeqCst);
        if mode == FAIL {
            return ResponseTemplate::new(500)
                .set_body_json(json!({"error": {"message": "model crashed"}}));
        }
        let body: Value = serde_json::from_slice(&request.body).unwrap();
        let data: Vec<Value> = body["input"]
            .as_array()
            .unwrap()
            .iter()
            .enumerate()
            .map(|(i, text)| {
                let text = text.as_str().unwrap().to_lowercase();
                let mut v: Vec<f32> = CONCEPTS
                    .iter()
                    .map(|words| words.iter().filter(|w| text.contains(*w)).count() as f32)
                    .collect();
                v.push(0.1); // never a zero vector
                if mode == WRONG_DIMENSION {
                    v.pop();
                }
                json!({"object": "embedding", "index": i, "embedding": v})
            })
            .collect();
        ResponseTemplate::new(200).set_body_json(json!({
            "object": "list",
            "data": data,
            "model": body["model"],
            "usage": {"prompt_tokens": 8, "total_tokens": 8},
        }))
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    server: MockServer,
    mode: Arc<AtomicU8>,
    store: Arc<dyn MemoryStore>,
    hybrid: HybridSelector,
}

async fn put(store: &Arc<dyn MemoryStore>, rel: &str, description: &str, body: &str) {
    let doc = MemoryDoc {
        name: rel.trim_end_matches(".md").to_owned(),
        description: description.into(),
        memory_type: Some(MemoryType::Project),
        body: body.into(),
    };
    store.write(rel, &doc, WriteMode::Overwrite).await.unwrap();
}

/// A real memory dir with memories in English, Japanese, Russian and Korean, and a hybrid
/// selector embedding through `OpenAiEmbedder` against the loopback server.
async fn setup() -> Setup {
    let server = MockServer::start().await;
    let mode = Arc::new(AtomicU8::new(NORMAL));
    Mock::given(method("POST"))
        .and(path("/v1/embeddings"))
        .respond_with(ConceptServer { mode: mode.clone() })
        .mount(&server)
        .await;
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(tmp.path().join("memory")).unwrap());
    put(
        &store,
        "primary-database.md",
        "The primary database is PostgreSQL 16",
        "The main database runs PostgreSQL 16 in eu-west; replicas are read-only.",
    )
    .await;
    // Half-width katakana and full-width Latin: NFKC makes them キャッシュ and Redis.
    put(
        &store,
        "セッション.md",
        "ｾｯｼｮﾝのｷｬｯｼｭはＲｅｄｉｓに置く",
        "ログイン情報のｷｬｯｼｭは２４時間で消える。",
    )
    .await;
    put(
        &store,
        "копии.md",
        "Резервные копии делаются каждую ночь",
        "Резервное копирование в три часа ночи, хранится тридцать дней.",
    )
    .await;
    put(
        &store,
        "배포.md",
        "배포는 화요일에 한다",
        "금요일에는 배포하지 않는다.",
    )
    .await;
    let mut config = OpenAiEmbedConfig::new(format!("{}/v1", server.uri()), "bge-m3");
    config.retry = RetryPolicy {
        max_attempts: 2,
        initial_backoff: Duration::from_millis(1),
        max_backoff: Duration::from_millis(5),
        max_retry_after: Duration::from_secs(1),
    };
    let embedder = Arc::new(OpenAiEmbedder::connect(config).await.unwrap());
    assert_eq!(embedder.dimension(), CONCEPTS.len() + 1);
    let cache = vector_cache_for(&*store, embedder.model_id());
    let hybrid =
        HybridSelector::with_config(store.clone(), embedder, cache, HybridConfig::default());
    Setup {
        _tmp: tmp,
        server,
        mode,
        store,
        hybrid,
    }
}

/// Every `input` string the server received, in order, and the raw request bodies.
async fn received(server: &MockServer) -> (Vec<String>, Vec<String>) {
    let requests = server.received_requests().await.unwrap();
    let mut inputs = Vec::new();
    let mut raw = Vec::new();
    for r in &requests {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        assert_eq!(body["model"], "bge-m3");
        for t in body["input"].as_array().unwrap() {
            inputs.push(t.as_str().unwrap().to_owned());
        }
        raw.push(String::from_utf8(r.body.clone()).unwrap());
    }
    (inputs, raw)
}

async fn select(s: &Setup, query: &str, limit: usize, sink: &VecSink) -> Vec<String> {
    let headers = s.store.scan().await.unwrap();
    let ctx = SelectionContext {
        events: Arc::new(sink.clone()),
        ..SelectionContext::with_limit(limit)
    };
    let hybrid: &dyn Selector = &s.hybrid;
    hybrid.select_checked(query, &headers, &ctx).await.unwrap()
}

#[tokio::test]
async fn a_chinese_query_finds_an_english_memory_and_a_russian_query_a_japanese_one() {
    let s = setup().await;
    let sink = VecSink::default();
    // No word in common: only the vectors connect them.
    assert_eq!(
        select(&s, "我们用的是哪个数据库？", 1, &sink).await,
        vec!["primary-database.md"]
    );
    assert_eq!(
        select(&s, "Где лежит кэш сессий?", 1, &sink).await,
        vec!["セッション.md"]
    );
    let mut both = select(&s, "데이터베이스 백업은 언제?", 2, &sink).await;
    both.sort();
    assert_eq!(both, vec!["primary-database.md", "копии.md"]);
    assert_eq!(
        select(&s, "Когда развёртывание?", 1, &sink).await,
        vec!["배포.md"]
    );
    assert!(sink.events().is_empty(), "{:?}", sink.events());
}

#[tokio::test]
async fn the_server_receives_nfkc_text_in_its_own_script() {
    let s = setup().await;
    let sink = VecSink::default();
    select(&s, "ｷｬｯｼｭはどこ？", 1, &sink).await;
    let (inputs, raw) = received(&s.server).await;
    // The memories' text, NFKC: half-width katakana become full-width, full-width Latin and
    // digits become ASCII; nothing transliterated.
    let japanese = inputs
        .iter()
        .find(|t| t.starts_with("セッション"))
        .unwrap_or_else(|| panic!("{inputs:?}"));
    assert!(
        japanese.contains("セッションのキャッシュはRedisに置く"),
        "{japanese}"
    );
    assert!(japanese.contains("24時間"), "{japanese}");
    assert!(
        !japanese.contains('ｷ') && !japanese.contains('Ｒ'),
        "{japanese}"
    );
    assert!(
        inputs
            .iter()
            .any(|t| t.contains("Резервные копии делаются каждую ночь")),
        "{inputs:?}"
    );
    assert!(
        inputs.iter().any(|t| t.contains("배포는 화요일에 한다")),
        "{inputs:?}"
    );
    // The query too is NFKC (the memories are), in its script.
    assert!(
        inputs.iter().any(|t| t == "キャッシュはどこ?"),
        "{inputs:?}"
    );
    // On the wire: UTF-8 as is, not \u escapes.
    let all = raw.concat();
    assert!(
        all.contains("キャッシュ") && all.contains("Резервные"),
        "{all}"
    );
    assert!(!all.contains("\\u"), "{all}");
}

#[tokio::test]
async fn a_server_error_degrades_to_bm25_with_an_event() {
    let s = setup().await;
    let sink = VecSink::default();
    // Every memory embedded while the server was well: only the query's embedding goes wrong.
    let report = s.hybrid.warm(&s.store.scan().await.unwrap()).await.unwrap();
    assert_eq!(report.embedded, 4);
    s.mode.store(FAIL, Ordering::SeqCst);
    // BM25 alone still answers a query that shares words with a memory.
    let got = select(&s, "резервные копии", 1, &sink).await;
    assert_eq!(got, vec!["копии.md"]);
    let events = sink.events();
    assert!(
        matches!(&events.iter().map(AgentEvent::extension).collect::<Vec<_>>()[..], [Some(RecallEvent::RecallDegraded { selector, reason })]
            if selector == "hybrid" && reason.contains("500")),
        "{events:?}"
    );
    // And the cross-lingual query finds nothing by BM25: no dense half, no English memory.
    let got = select(&s, "我们用的是哪个数据库？", 1, &sink).await;
    assert!(got.is_empty(), "{got:?}");
    assert_eq!(sink.events().len(), 2);
}

#[tokio::test]
async fn a_wrong_dimension_degrades_to_bm25_with_an_event() {
    let s = setup().await;
    let sink = VecSink::default();
    // Every memory embedded while the server was well: only the query's embedding goes wrong.
    let report = s.hybrid.warm(&s.store.scan().await.unwrap()).await.unwrap();
    assert_eq!(report.embedded, 4);
    s.mode.store(WRONG_DIMENSION, Ordering::SeqCst);
    let got = select(&s, "배포 화요일", 1, &sink).await;
    assert_eq!(got, vec!["배포.md"]);
    let events = sink.events();
    assert!(
        matches!(&events.iter().map(AgentEvent::extension).collect::<Vec<_>>()[..], [Some(RecallEvent::RecallDegraded { selector, reason })]
            if selector == "hybrid" && reason.contains(&format!("of {}", CONCEPTS.len() + 1))),
        "{events:?}"
    );
}
