//! Tiers and background summaries over the real MCP protocol, with real OpenAI-compatible
//! loopback servers behind the real provider: the save returns at once; the configured model,
//! then the fallback, writes the abstract (L0) and overview (L1); both down → three retries with
//! growing waits (paused clock) then the raw text; garbage, empty, credential-bearing or
//! wrong-script answers are failures; a pending summary survives a restart; without a model L1
//! is the text cut on a character boundary.
//!
//! Opt-in, against a real local model: start `local-llm.sh start` from the shared tools and set
//! `MEMLOOP_TEST_LOCAL_LLM=http://127.0.0.1:8089/v1` (see the README).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use async_trait::async_trait;
use memloop_core::CancellationToken;
use memloop_core::model::{Model, ModelError, ModelRequest, ModelResponse};
use memloop_mcp::{L1_MAX_BYTES, McpConfig, SummaryConfig};
use memloop_providers::{OpenAiCompatModel, OpenAiConfig, RetryPolicy};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Fixture, call, connect_with_server, s, save};

/// The OpenAI chat-completions answer carrying `text`.
fn chat(text: &str) -> Value {
    json!({
        "id": "chatcmpl-1", "object": "chat.completion", "model": "summ",
        "choices": [{ "index": 0, "finish_reason": "stop",
                      "message": { "role": "assistant", "content": text } }],
        "usage": { "prompt_tokens": 50, "completion_tokens": 20, "total_tokens": 70 }
    })
}

/// A summary answer as the model writes it.
fn summary(abstract_line: &str, overview: &str) -> String {
    json!({ "abstract": abstract_line, "overview": overview }).to_string()
}

/// The entry text a summary request carries (its user message).
fn entry_of(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["content"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// A loopback server answering each request with `answer(request)`; the requests it got.
fn server(answer: impl Fn(&Value) -> String + Send + 'static) -> (String, Arc<Mutex<Vec<Value>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let url = memloop_testkit::json_server(move |request: Value| {
        let text = answer(&request);
        log.lock().unwrap().push(request);
        chat(&text)
    })
    .unwrap();
    (format!("{url}/v1"), seen)
}

/// A base URL where nothing listens.
fn down_url() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    drop(l);
    url
}

/// The real OpenAI-compatible provider at `url`: no retries of its own and no timeout (the
/// summariser's rounds are what is tested, and a paused clock must not fire a timeout while a
/// loopback request is in flight).
fn model_at(url: &str) -> Arc<dyn Model> {
    let mut c = OpenAiConfig::new(url, "summ");
    c.retry = RetryPolicy::none();
    c.timeout = None;
    Arc::new(OpenAiCompatModel::new(c).unwrap())
}

fn with_summaries(fx: &Fixture, summaries: SummaryConfig) -> McpConfig {
    let mut c = fx.config();
    c.summaries = summaries;
    c
}

fn fast(model: Option<Arc<dyn Model>>, fallback: Option<Arc<dyn Model>>) -> SummaryConfig {
    SummaryConfig {
        model,
        fallback,
        retry_delays: vec![Duration::from_millis(1); 3],
        call_timeout: None,
        ..SummaryConfig::default()
    }
}

fn memory_dir(fx: &Fixture, project: &Path) -> PathBuf {
    memloop_paths::project_dir(&fx.home, project).join("memory")
}

/// The pending-work records of a memory dir.
fn pending_records(mem: &Path) -> Vec<String> {
    std::fs::read_dir(mem.join(".memloop-summaries"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn read(mem: &Path, rel: &str) -> String {
    std::fs::read_to_string(mem.join(rel)).unwrap()
}

/// The `description:` line of a memory file.
fn description(file: &str) -> String {
    file.lines()
        .find_map(|l| l.strip_prefix("description: "))
        .unwrap()
        .trim_matches('"')
        .to_owned()
}

#[tokio::test]
async fn save_returns_at_once_and_the_fallback_summarises_when_the_provider_is_down() {
    let fx = Fixture::new();
    let project = fx.project("app");
    // The fallback holds its first answer until the test releases it.
    let (release, gate) = std::sync::mpsc::channel::<()>();
    let gate = Mutex::new(Some(gate));
    let n = AtomicUsize::new(0);
    let (fallback, seen) = server(move |req| {
        if let Some(g) = gate.lock().unwrap().take() {
            g.recv().unwrap();
        }
        let entry = entry_of(req);
        match n.fetch_add(1, Ordering::SeqCst) {
            0 => {
                assert!(entry.contains("Stripe"), "{entry}");
                summary(
                    "Payments go through Stripe",
                    "Stripe was chosen over Adyen for its API and fees.\nRevisit in Q3.",
                )
            }
            _ => summary(
                "Payments go through Adyen now",
                "Switched to Adyen for EU acquiring.",
            ),
        }
    });
    let config = fast(Some(model_at(&down_url())), Some(model_at(&fallback)));
    let (client, server_handle) = connect_with_server(with_summaries(&fx, config)).await;
    let content = "We compared Stripe and Adyen for card payments.\n\nStripe won on API quality and \
                   fees; Adyen stays the backup. Revisit in Q3.";
    let r = save(
        &client,
        &project,
        json!([{ "type": "decision", "title": "Payments", "content": content }]),
    )
    .await;
    // The model has not answered (it is held), yet the save is done: raw text on disk, pending.
    assert_eq!(r["written"], 1, "{r}");
    assert_eq!(r["results"][0]["summary_state"], "pending");
    let rel = r["results"][0]["path"].as_str().unwrap().to_owned();
    let mem = memory_dir(&fx, &project);
    let file = read(&mem, &rel);
    assert!(file.contains(content) && file.contains("<!-- memloop:summary pending -->"));
    assert_eq!(
        description(&file),
        "We compared Stripe and Adyen for card payments."
    );
    assert_eq!(pending_records(&mem).len(), 1);
    let l = call(
        &client,
        "context_search",
        json!({ "project_path": s(&project), "query": "stripe" }),
    )
    .await;
    assert_eq!(l["results"][0]["summary_state"], "pending", "{l}");
    assert!(
        !l["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("memloop:")
    );

    release.send(()).unwrap();
    server_handle.summaries_settled().await;
    let file = read(&mem, &rel);
    assert_eq!(description(&file), "Payments go through Stripe");
    assert!(
        file.contains(content) && !file.contains("pending"),
        "{file}"
    );
    assert!(
        file.contains("<!-- memloop:overview\nStripe was chosen over Adyen"),
        "{file}"
    );
    assert!(pending_records(&mem).is_empty());
    assert!(read(&mem, "MEMORY.md").contains("Payments go through Stripe"));
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0]["response_format"]["type"], "json_schema");

    // Search shows L1 (the overview), detail full shows L2 (the text) with the overview beside.
    let args =
        |detail: &str| json!({ "project_path": s(&project), "query": "stripe", "detail": detail });
    let l1 = call(&client, "context_search", args("summary")).await;
    let hit = &l1["results"][0];
    assert_eq!(hit["tier"], "L1", "{l1}");
    assert_eq!(hit["summary_state"], "written");
    assert_eq!(
        hit["content"],
        "Stripe was chosen over Adyen for its API and fees.\nRevisit in Q3."
    );
    assert_eq!(hit["description"], "Payments go through Stripe");
    let l2 = call(&client, "context_search", args("full")).await;
    let hit = &l2["results"][0];
    let version = hit["version"].clone();
    assert_eq!((&hit["tier"], &hit["detail"]), (&json!("L2"), &Value::Null));
    assert_eq!(hit["content"].as_str().unwrap().trim_end(), content);
    assert!(
        hit["overview"]
            .as_str()
            .unwrap()
            .starts_with("Stripe was chosen")
    );
    // Lists show L0.
    let list = call(
        &client,
        "context_manage",
        json!({ "project_path": s(&project), "action": "list" }),
    )
    .await;
    assert_eq!(
        list["memories"][0]["description"],
        "Payments go through Stripe"
    );
    let load = call(
        &client,
        "context_load",
        json!({ "project_path": s(&project) }),
    )
    .await;
    assert_eq!(
        load["active_decisions"],
        json!(["Payments: Payments go through Stripe"])
    );

    // An update is summarised again.
    let u = call(
        &client,
        "context_manage",
        json!({ "project_path": s(&project), "action": "update", "target": rel,
                "content": "We moved card payments to Adyen for EU acquiring.",
                "expected_version": version }),
    )
    .await;
    assert_eq!(u["summary_state"], "pending", "{u}");
    server_handle.summaries_settled().await;
    let file = read(&mem, &rel);
    assert_eq!(description(&file), "Payments go through Adyen now");
    assert!(
        file.contains("Switched to Adyen") && !file.contains("Stripe was chosen"),
        "{file}"
    );
}

/// A model that notes when (on the tokio clock) each call starts, then asks the real one.
struct Timed {
    inner: Arc<dyn Model>,
    label: &'static str,
    log: Arc<Mutex<Vec<(&'static str, tokio::time::Instant)>>>,
}

#[async_trait]
impl Model for Timed {
    fn name(&self) -> &str {
        self.label
    }

    async fn complete(
        &self,
        request: ModelRequest,
        cancel: CancellationToken,
    ) -> Result<ModelResponse, ModelError> {
        self.log
            .lock()
            .unwrap()
            .push((self.label, tokio::time::Instant::now()));
        self.inner.complete(request, cancel).await
    }
}

#[tokio::test(start_paused = true)]
async fn both_down_means_three_growing_retries_then_the_raw_text_alone() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let log = Arc::new(Mutex::new(Vec::new()));
    let timed = |label, url: String| -> Arc<dyn Model> {
        Arc::new(Timed {
            inner: model_at(&url),
            label,
            log: log.clone(),
        })
    };
    let config = SummaryConfig {
        model: Some(timed("provider", down_url())),
        fallback: Some(timed("fallback", down_url())),
        call_timeout: None,
        ..SummaryConfig::default()
    };
    let delays = config.retry_delays.clone();
    let (client, server_handle) = connect_with_server(with_summaries(&fx, config)).await;
    let content = "Вынесли очередь задач в отдельный сервис.\nПричина: нагрузка.";
    let r = save(
        &client,
        &project,
        json!([{ "type": "change", "title": "Очередь", "content": content }]),
    )
    .await;
    let rel = r["results"][0]["path"].as_str().unwrap().to_owned();
    let started = tokio::time::Instant::now();
    server_handle.summaries_settled().await;

    let log = log.lock().unwrap().clone();
    let labels: Vec<&str> = log.iter().map(|(l, _)| *l).collect();
    assert_eq!(
        labels,
        ["provider", "fallback"].repeat(4),
        "one first try and three retries"
    );
    let rounds: Vec<Duration> = log
        .iter()
        .step_by(2)
        .map(|(_, t)| t.duration_since(started))
        .collect();
    let waits: Vec<Duration> = rounds.windows(2).map(|w| w[1] - w[0]).collect();
    assert_eq!(
        waits, delays,
        "the waits between rounds are the configured ones"
    );
    assert!(waits.windows(2).all(|w| w[0] < w[1]), "growing: {waits:?}");
    assert_eq!(delays.len(), 3);

    let mem = memory_dir(&fx, &project);
    let file = read(&mem, &rel);
    assert!(file.contains(content), "{file}");
    assert!(!file.contains("memloop:"), "the raw text alone: {file}");
    assert_eq!(
        description(&file),
        "Вынесли очередь задач в отдельный сервис."
    );
    assert!(pending_records(&mem).is_empty());
    let hit = call(
        &client,
        "context_search",
        json!({ "project_path": s(&project), "query": "очередь" }),
    )
    .await;
    assert_eq!(hit["results"][0]["summary_state"], "none", "{hit}");
    assert_eq!(hit["results"][0]["content"], content);
}

#[tokio::test]
async fn garbage_empty_and_credential_answers_are_failures() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let key = "AKIAIOSFODNN7EXAMPLE";
    let n = AtomicUsize::new(0);
    let (url, seen) = server(move |_| match n.fetch_add(1, Ordering::SeqCst) {
        0 => "This entry is about deploying on Tuesdays.".into(),
        1 => String::new(),
        2 => summary("", "Deploys run on Tuesdays."),
        3 => summary(
            "Deploys on Tuesdays",
            &format!("Use the key {key} to deploy."),
        ),
        _ => summary(
            "Deploys on Tuesdays",
            "Deploys run on Tuesdays after the freeze.",
        ),
    });
    let (client, server_handle) =
        connect_with_server(with_summaries(&fx, fast(Some(model_at(&url)), None))).await;
    let content = "Deploys run on Tuesdays after the code freeze.";
    let r = save(
        &client,
        &project,
        json!([{ "type": "knowledge", "title": "Deploy day", "content": content }]),
    )
    .await;
    let rel = r["results"][0]["path"].as_str().unwrap().to_owned();
    server_handle.summaries_settled().await;
    let mem = memory_dir(&fx, &project);
    assert_eq!(seen.lock().unwrap().len(), 4, "four rounds, all failed");
    let file = read(&mem, &rel);
    assert!(
        !file.contains("memloop:") && file.contains(content),
        "{file}"
    );
    assert_eq!(description(&file), content);
    for f in Fixture::files_under(&fx.home) {
        let p = fx.home.join(&f);
        if p.is_file() {
            assert!(
                !std::fs::read_to_string(&p)
                    .unwrap_or_default()
                    .contains(key),
                "{f}"
            );
        }
    }

    // The fifth answer is a good one: the next entry is summarised.
    let r = save(
        &client,
        &project,
        json!([{ "type": "knowledge", "title": "Deploy day 2", "content": content }]),
    )
    .await;
    server_handle.summaries_settled().await;
    let file = read(&mem, r["results"][0]["path"].as_str().unwrap());
    assert_eq!(description(&file), "Deploys on Tuesdays");
}

#[tokio::test]
async fn cjk_and_cyrillic_entries_get_summaries_in_their_own_script() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let is_han = |t: &str| t.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    // The provider answers Chinese entries in English (refused) and Russian ones in Russian.
    let (provider, _) = server(move |req| {
        if is_han(&entry_of(req)) {
            summary("Use PostgreSQL 16", "Chosen for JSONB.")
        } else {
            summary(
                "Миграция на PostgreSQL 16",
                "Выбрали ради JSONB и репликации.",
            )
        }
    });
    let (fallback, fallback_seen) = server(|_| {
        summary(
            "数据库选定 PostgreSQL 16",
            "团队选定 PostgreSQL 16，原因是 JSONB 和逻辑复制；MySQL 被否决。",
        )
    });
    let (client, server_handle) = connect_with_server(with_summaries(
        &fx,
        fast(Some(model_at(&provider)), Some(model_at(&fallback))),
    ))
    .await;
    let zh = "我们比较了 MySQL 和 PostgreSQL，最终决定使用 PostgreSQL 16，因为需要 JSONB 支持和逻辑复制。";
    let ru = "Переносим базу на PostgreSQL 16: нужны JSONB и логическая репликация.";
    let r = save(
        &client,
        &project,
        json!([
            { "type": "decision", "title": "数据库", "content": zh },
            { "type": "decision", "title": "База данных", "content": ru },
        ]),
    )
    .await;
    assert_eq!(r["written"], 2, "{r}");
    server_handle.summaries_settled().await;
    let mem = memory_dir(&fx, &project);
    let zh_file = read(&mem, r["results"][0]["path"].as_str().unwrap());
    assert_eq!(description(&zh_file), "数据库选定 PostgreSQL 16");
    assert!(zh_file.contains("团队选定 PostgreSQL 16") && zh_file.contains(zh));
    let ru_file = read(&mem, r["results"][1]["path"].as_str().unwrap());
    assert_eq!(description(&ru_file), "Миграция на PostgreSQL 16");
    assert_eq!(
        fallback_seen.lock().unwrap().len(),
        1,
        "only the Chinese entry fell back"
    );
    let hit = call(
        &client,
        "context_search",
        json!({ "project_path": s(&project), "query": "逻辑复制 JSONB" }),
    )
    .await;
    let texts: Vec<&str> = hit["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["content"].as_str().unwrap())
        .collect();
    assert!(
        texts.contains(&"团队选定 PostgreSQL 16，原因是 JSONB 和逻辑复制；MySQL 被否决。"),
        "{hit}"
    );
}

#[tokio::test]
async fn a_pending_summary_survives_a_restart() {
    let fx = Fixture::new();
    let project = fx.project("app");
    // First server: its model is down and it would wait an hour before retrying.
    let down = SummaryConfig {
        model: Some(model_at(&down_url())),
        retry_delays: vec![Duration::from_secs(3600)],
        ..SummaryConfig::default()
    };
    let (client, server_handle) = connect_with_server(with_summaries(&fx, down)).await;
    let content = "배포 전에 마이그레이션 스크립트를 검토해야 한다.";
    let r = save(
        &client,
        &project,
        json!([{ "type": "todo", "title": "마이그레이션 검토", "content": content }]),
    )
    .await;
    let rel = r["results"][0]["path"].as_str().unwrap().to_owned();
    drop(client);
    drop(server_handle); // the server stops; its worker is dropped mid-wait
    let mem = memory_dir(&fx, &project);
    assert!(read(&mem, &rel).contains("memloop:summary pending"));
    assert_eq!(pending_records(&mem).len(), 1);

    // A new server (same roots) finds the pending entry and writes its summary.
    let (url, seen) = server(|_| {
        summary(
            "배포 전 마이그레이션 검토",
            "배포 전에 스크립트를 검토한다.",
        )
    });
    let (client, server_handle) =
        connect_with_server(with_summaries(&fx, fast(Some(model_at(&url)), None))).await;
    server_handle.summaries_settled().await;
    assert_eq!(seen.lock().unwrap().len(), 1);
    let file = read(&mem, &rel);
    assert_eq!(description(&file), "배포 전 마이그레이션 검토");
    assert!(
        file.contains(content) && !file.contains("pending"),
        "{file}"
    );
    assert!(pending_records(&mem).is_empty());
    let load = call(
        &client,
        "context_load",
        json!({ "project_path": s(&project) }),
    )
    .await;
    assert_eq!(
        load["open_todos"][0]["content"], "배포 전에 스크립트를 검토한다.",
        "{load}"
    );
}

#[tokio::test]
async fn without_a_model_nothing_waits_and_l1_is_the_text_cut_safely() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let (client, server_handle) = connect_with_server(fx.config()).await;
    let long = "デプロイ手順：まずステージングで検証し、その後本番に反映する。".repeat(40);
    assert!(long.len() > 2 * L1_MAX_BYTES);
    let r = save(
        &client,
        &project,
        json!([{ "type": "knowledge", "title": "デプロイ手順", "content": long }]),
    )
    .await;
    assert_eq!(r["results"][0]["summary_state"], "none", "{r}");
    server_handle.summaries_settled().await; // at once: summaries are off
    let mem = memory_dir(&fx, &project);
    assert!(!read(&mem, r["results"][0]["path"].as_str().unwrap()).contains("memloop:"));
    assert!(
        !mem.join(".memloop-summaries").exists(),
        "nothing created for summaries"
    );
    let args = |detail: &str| json!({ "project_path": s(&project), "query": "デプロイ", "detail": detail });
    let l1 = call(&client, "context_search", args("summary")).await;
    let hit = &l1["results"][0];
    let shown = hit["content"].as_str().unwrap().strip_suffix('…').unwrap();
    assert!(
        shown.len() <= L1_MAX_BYTES && long.starts_with(shown),
        "{hit}"
    );
    assert!(
        shown.len() > L1_MAX_BYTES - 4,
        "cut at the last whole character"
    );
    assert_eq!(hit["content_cut"], true);
    let l2 = call(&client, "context_search", args("full")).await;
    assert_eq!(
        l2["results"][0]["content"].as_str().unwrap().trim_end(),
        long
    );
}

/// Opt-in: a real model (llama.cpp's server with a small instruct model) writes the summary.
/// `MEMLOOP_TEST_LOCAL_LLM` is its base URL with the version path.
#[tokio::test]
async fn a_local_model_writes_a_summary_when_asked() {
    let Ok(url) = std::env::var("MEMLOOP_TEST_LOCAL_LLM") else {
        eprintln!("SKIP: set MEMLOOP_TEST_LOCAL_LLM to a local OpenAI-compatible server's /v1 URL");
        return;
    };
    let fx = Fixture::new();
    let project = fx.project("app");
    let mut c = OpenAiConfig::new(url, "local");
    c.timeout = Some(Duration::from_secs(300));
    let model: Arc<dyn Model> = Arc::new(OpenAiCompatModel::new(c).unwrap());
    let (client, server_handle) =
        connect_with_server(with_summaries(&fx, fast(Some(model), None))).await;
    let content = "We decided to run the integration tests against a real PostgreSQL 16 server \
                   instead of SQLite, because the production queries use JSONB operators and \
                   row-level locks that SQLite does not have.";
    let r = save(
        &client,
        &project,
        json!([{ "type": "decision", "title": "Test database", "content": content }]),
    )
    .await;
    server_handle.summaries_settled().await;
    let file = read(
        &memory_dir(&fx, &project),
        r["results"][0]["path"].as_str().unwrap(),
    );
    eprintln!("{file}");
    assert!(file.contains(content));
    assert!(
        file.contains("<!-- memloop:overview\n"),
        "the model's summary was refused: {file}"
    );
    assert_ne!(
        description(&file),
        "We decided to run the integration tests against a real PostgreSQL 16 server instead of SQLite, because the production queries use JSONB operators and row-level locks that SQLite does not have."
    );
}
