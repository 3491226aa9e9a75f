//! `RerankSelector` end to end: BM25's short list re-ranked by a model behind the
//! OpenAI-compatible chat-completions client (`OpenAiCompatModel`), over real HTTP.
//!
//! **The server is a scripted ranker, not a model**: a loopback wiremock server speaking the
//! chat-completions wire shape (request `{"model", "messages", "response_format"}`, response
//! `{"choices": [{"message": {"content"}}]}`) that reads the manifest memloop sent and picks
//! the listed memories whose line holds a marker phrase, last listed first. What is tested is
//! memloop's side: only the short list reaches the model, as UTF-8, the model's picks come
//! first and the rest of the list backfills, names the model was not shown are dropped, and a
//! failing server leaves the first stage's order with `RecallEvent::RecallDegraded`.
#![cfg(feature = "providers")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemoryStore;
use memloop::Selector;
use memloop::core::events::VecSink;
use memloop::memory::files::FileMemoryStore;
use memloop::memory::recall::{
    Bm25Selector, LlmSelector, RecallEvent, RerankConfig, RerankSelector, SelectionContext,
};
use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
use memloop::providers::{OpenAiCompatModel, OpenAiConfig, RetryPolicy};
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

const MEMORIES: [(&str, &str); 8] = [
    ("zh/migrate.md", "数据库迁移由 CI 在每次发布前运行"),
    ("zh/freeze.md", "周五下午两点以后禁止数据库迁移"),
    ("zh/backup.md", "数据库每天凌晨三点备份"),
    ("zh/weekly.md", "周五下午团建，大家一起去爬山"),
    ("ja/cache.md", "キャッシュは毎晩クリアされる"),
    (
        "ru/deploy.md",
        "Развёртывание базы данных по пятницам запрещено",
    ),
    (
        "ru/backup.md",
        "Резервная копия базы данных хранится неделю",
    ),
    ("ko/log.md", "로그는 30일 동안 보관된다"),
];

/// Picks the manifest's memories whose line contains `marker` (last listed first), and can
/// be told to name a memory it was not shown, or to fail.
struct Ranker {
    marker: &'static str,
    extra: Option<&'static str>,
    fail: bool,
    seen: Arc<Mutex<Vec<String>>>,
}

impl Respond for Ranker {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let raw = String::from_utf8(request.body.clone()).unwrap();
        self.seen.lock().unwrap().push(raw.clone());
        if self.fail {
            return ResponseTemplate::new(500).set_body_string("model crashed");
        }
        let body: Value = serde_json::from_str(&raw).unwrap();
        let user = body["messages"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|m| m["role"] == "user")
            .filter_map(|m| m["content"].as_str())
            .collect::<Vec<_>>()
            .join("\n");
        let mut picks: Vec<String> = user
            .lines()
            .filter(|l| l.starts_with("- ") && l.contains(self.marker))
            .filter_map(|l| l.split_whitespace().find(|w| w.ends_with(".md")))
            .map(str::to_owned)
            .collect();
        picks.reverse();
        picks.extend(self.extra.map(str::to_owned));
        let content = json!({ "selected_memories": picks }).to_string();
        ResponseTemplate::new(200).set_body_json(json!({
            "id": "chatcmpl-ranker",
            "object": "chat.completion",
            "created": 0,
            "model": "ranker",
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
                "finish_reason": "stop",
            }],
            "usage": {"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
        }))
    }
}

struct Setup {
    _tmp: tempfile::TempDir,
    store: Arc<dyn MemoryStore>,
    seen: Arc<Mutex<Vec<String>>>,
    selector: RerankSelector,
    bm25: Bm25Selector,
    _server: MockServer,
}

async fn setup(marker: &'static str, extra: Option<&'static str>, fail: bool) -> Setup {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(tmp.path().join("memory")).unwrap());
    for (rel, text) in MEMORIES {
        let doc = MemoryDoc::new(rel, text, MemoryType::Project, text);
        store.write(rel, &doc, WriteMode::Overwrite).await.unwrap();
    }
    let server = MockServer::start().await;
    let seen = Arc::new(Mutex::new(Vec::new()));
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(Ranker {
            marker,
            extra,
            fail,
            seen: seen.clone(),
        })
        .mount(&server)
        .await;
    let mut config = OpenAiConfig::new(format!("{}/v1/", server.uri()), "ranker").with_api_key("x");
    config.retry = RetryPolicy::none();
    config.timeout = Some(Duration::from_secs(10));
    let model = Arc::new(OpenAiCompatModel::new(config).unwrap());
    let selector = RerankSelector::with_config(
        Arc::new(Bm25Selector::new(store.clone())),
        LlmSelector::new(model),
        RerankConfig {
            shortlist: 3,
            backfill: true,
        },
    );
    Setup {
        _tmp: tmp,
        bm25: Bm25Selector::new(store.clone()),
        store,
        seen,
        selector,
        _server: server,
    }
}

async fn select(
    s: &Setup,
    selector: &dyn Selector,
    query: &str,
    ctx: &SelectionContext,
) -> Vec<String> {
    let headers = s.store.scan().await.unwrap();
    selector.select_checked(query, &headers, ctx).await.unwrap()
}

#[tokio::test]
async fn the_model_reorders_the_short_list_and_sees_only_it() {
    let s = setup("周五", None, false).await;
    let ctx = SelectionContext::with_limit(3);
    let query = "数据库迁移可以在周五运行吗？";
    let first = select(&s, &s.bm25, query, &ctx).await;
    assert_eq!(first.len(), 3, "BM25's short list: {first:?}");
    assert!(first.contains(&"zh/freeze.md".to_owned()));
    assert!(
        !first.contains(&"zh/weekly.md".to_owned()),
        "the team outing shares only 周五 with the query: {first:?}"
    );
    let got = select(&s, &s.selector, query, &ctx).await;
    // The model's pick first, then the rest of the short list in BM25's order.
    let mut want = vec!["zh/freeze.md".to_owned()];
    want.extend(first.iter().filter(|p| *p != "zh/freeze.md").cloned());
    assert_eq!(got, want);
    let seen = s.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    // Only the short list was shown, its Chinese text as UTF-8 (not `\u` escapes).
    for p in &first {
        assert!(seen[0].contains(p.as_str()), "{p} not shown");
    }
    assert!(!seen[0].contains("zh/weekly.md"), "outside the short list");
    assert!(seen[0].contains("周五下午两点以后禁止数据库迁移"));
    assert!(seen[0].contains("数据库迁移可以在周五运行吗"));
}

#[tokio::test]
async fn a_russian_query_is_reranked_the_same_way() {
    let s = setup("Резервная", None, false).await;
    let ctx = SelectionContext::with_limit(2);
    let query = "Что с базой данных по пятницам и где резервная копия?";
    let first = select(&s, &s.bm25, query, &ctx).await;
    let got = select(&s, &s.selector, query, &ctx).await;
    assert_eq!(got[0], "ru/backup.md", "BM25 alone: {first:?}");
    assert_eq!(got.len(), 2);
    assert!(s.seen.lock().unwrap()[0].contains("Резервная копия базы данных"));
}

#[tokio::test]
async fn names_the_model_was_not_shown_are_dropped() {
    let s = setup("周五", Some("zh/weekly.md"), false).await;
    // A short list of 3: the team outing (周五 only) is not on it.
    let ctx = SelectionContext::with_limit(2);
    let got = select(&s, &s.selector, "数据库迁移可以在周五运行吗？", &ctx).await;
    assert_eq!(got[0], "zh/freeze.md");
    assert!(!got.contains(&"zh/weekly.md".to_owned()), "{got:?}");
    assert!(!s.seen.lock().unwrap()[0].contains("zh/weekly.md"));
}

#[tokio::test]
async fn without_backfill_only_the_models_picks_are_returned() {
    let s = setup("周五", None, false).await;
    let headers = s.store.scan().await.unwrap();
    let model = {
        let uri = s._server.uri();
        let mut config = OpenAiConfig::new(format!("{uri}/v1/"), "ranker").with_api_key("x");
        config.retry = RetryPolicy::none();
        Arc::new(OpenAiCompatModel::new(config).unwrap())
    };
    let picky = RerankSelector::with_config(
        Arc::new(Bm25Selector::new(s.store.clone())),
        LlmSelector::new(model),
        RerankConfig {
            shortlist: 3,
            backfill: false,
        },
    );
    let picky: &dyn Selector = &picky;
    let got = picky
        .select_checked(
            "数据库迁移可以在周五运行吗？",
            &headers,
            &SelectionContext::with_limit(3),
        )
        .await
        .unwrap();
    assert_eq!(got, vec!["zh/freeze.md".to_owned()]);
}

#[tokio::test]
async fn a_failing_model_keeps_the_first_stage_order_and_says_so() {
    let s = setup("周五", None, true).await;
    let sink = Arc::new(VecSink::default());
    let ctx = SelectionContext {
        events: sink.clone(),
        ..SelectionContext::with_limit(2)
    };
    let query = "数据库迁移可以在周五运行吗？";
    let first = select(&s, &s.bm25, query, &ctx).await;
    let got = select(&s, &s.selector, query, &ctx).await;
    assert_eq!(got, first);
    assert_eq!(s.seen.lock().unwrap().len(), 1, "the model was asked");
    assert!(
        sink.events().iter().any(|e| matches!(
            e.extension(),
            Some(RecallEvent::RecallDegraded { selector, .. }) if selector == "rerank"
        )),
        "{:?}",
        sink.events()
    );
}
