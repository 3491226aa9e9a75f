//! `context_save` batches over real Streamable HTTP: all-or-nothing (one refused entry and
//! nothing is written), and exactly once per idempotency key (a retry after the first call
//! landed replays its answer; concurrent calls with one key write once; the same key with other
//! entries is refused), on the memory dir and on the PostgreSQL team store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{McpConfig, ProjectStores, Tokens};
use serde_json::{Value, json};
use std::path::Path;
use std::sync::Arc;
use support::team::TestTeam;
use support::{Fixture, HttpSession, s};

const WRITER: &str = "writer-token-0123456789";
const OTHER: &str = "other-writer-token-0123456789";
/// An AWS access key id (the documentation's example): the secret filter refuses it.
const AWS_KEY: &str = "AKIAIOSFODNN7EXAMPLE";

/// Which store the server keeps memories in.
#[derive(Debug, Clone, Copy)]
enum Backend {
    Files,
    Postgres,
}

/// A server over `backend` on loopback HTTP, behind two writer tokens; the team store (if any)
/// lives as long as the returned guard.
async fn serve(fx: &Fixture, backend: Backend) -> (support::HttpServer, Option<Arc<TestTeam>>) {
    let team = match backend {
        Backend::Files => None,
        Backend::Postgres => Some(TestTeam::new()),
    };
    let mut config: McpConfig = fx.config();
    config.stores = team.clone().map(|t| t as Arc<dyn ProjectStores>);
    let tokens = Tokens::parse(&format!("{WRITER}\n{OTHER}\n")).unwrap();
    (
        support::start_http_config(config, Some(tokens), None).await,
        team,
    )
}

/// The paths of the project's memories, sorted (through `context_manage list`).
async fn listed(session: &mut HttpSession, project: &Path) -> Vec<String> {
    let v = session
        .tool(
            "context_manage",
            json!({"project_path": s(project), "action": "list"}),
        )
        .await;
    let mut paths: Vec<String> = v["memories"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|m| m["path"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default();
    paths.sort();
    paths
}

fn paths_of(answer: &Value) -> Vec<(String, String)> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["path"].as_str().unwrap().to_owned(),
                r["version"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// A session summary (append-only: every save is a new file, so a duplicate would show) and
/// a decision.
fn batch(note: &str) -> Value {
    json!([
        {"type": "session_summary", "title": "会话总结", "content": format!("Migrated the billing jobs. {note}")},
        {"type": "decision", "title": "Billing queue", "content": format!("Use one queue per tenant. {note}")},
    ])
}

async fn a_retry_with_the_same_key_replays_the_first_answer(backend: Backend) {
    let fx = Fixture::new();
    let project = fx.project("billing");
    let (server, _team) = serve(&fx, backend).await;
    let mut a = HttpSession::open(&server.url, WRITER).await;
    let args = json!({"project_path": s(&project), "entries": batch("first"),
                      "idempotency_key": "6f1c9a52-retry-1"});
    let first = a.tool("context_save", args.clone()).await;
    assert_eq!(first["is_error"], false, "{first}");
    assert_eq!(first["written"], 2, "{first}");
    assert_eq!(first["replayed"], false, "{first}");
    let stored = listed(&mut a, &project).await;
    assert_eq!(stored.len(), 2, "{stored:?}");

    // The client lost the answer and retries, on a new session (a reconnect): the same answer,
    // the same paths and versions, and nothing new stored.
    let mut again = HttpSession::open(&server.url, WRITER).await;
    let second = again.tool("context_save", args.clone()).await;
    assert_eq!(second["is_error"], false, "{second}");
    assert_eq!(second["replayed"], true, "{second}");
    assert_eq!(paths_of(&second), paths_of(&first), "{second}");
    assert_eq!(listed(&mut again, &project).await, stored);

    // The same key with other entries: refused, nothing written.
    let mut changed = args.clone();
    changed["entries"] = batch("second");
    let reused = again.tool("context_save", changed.clone()).await;
    assert_eq!(reused["is_error"], true, "{reused}");
    assert_eq!(reused["code"], "idempotency_key_reused", "{reused}");
    assert_eq!(listed(&mut again, &project).await, stored);

    // Keys are per token: another client's key of the same name is its own.
    let mut other = HttpSession::open(&server.url, OTHER).await;
    let theirs = other.tool("context_save", changed).await;
    assert_eq!(theirs["is_error"], false, "{theirs}");
    assert_eq!(theirs["replayed"], false, "{theirs}");

    // A key that is no key is refused before anything is written.
    let mut bad = args;
    bad["idempotency_key"] = json!("has spaces\u{7}");
    let refused = again.tool("context_save", bad).await;
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["reason"]
            .as_str()
            .unwrap()
            .contains("idempotency_key"),
        "{refused}"
    );
}

#[tokio::test]
async fn a_retry_with_the_same_key_replays_the_first_answer_on_the_file_store() {
    a_retry_with_the_same_key_replays_the_first_answer(Backend::Files).await;
}

#[tokio::test]
async fn a_retry_with_the_same_key_replays_the_first_answer_on_postgres() {
    a_retry_with_the_same_key_replays_the_first_answer(Backend::Postgres).await;
}

async fn concurrent_calls_with_one_key_write_once(backend: Backend) {
    const CALLS: usize = 8;
    let fx = Fixture::new();
    let project = fx.project("billing");
    let (server, _team) = serve(&fx, backend).await;
    let args = json!({"project_path": s(&project), "entries": batch("once"),
                      "idempotency_key": "01J9ZK3V7Q-concurrent"});
    // Every client opens its session first, then all send the same save at once.
    let start = Arc::new(tokio::sync::Barrier::new(CALLS));
    let mut calls = Vec::new();
    for _ in 0..CALLS {
        let (url, args, start) = (server.url.clone(), args.clone(), start.clone());
        calls.push(tokio::spawn(async move {
            let mut session = HttpSession::open(&url, WRITER).await;
            start.wait().await;
            session.tool("context_save", args).await
        }));
    }
    let mut answers = Vec::new();
    for c in calls {
        answers.push(c.await.unwrap());
    }
    for a in &answers {
        assert_eq!(a["is_error"], false, "{a}");
        assert_eq!(paths_of(a), paths_of(&answers[0]), "{a}");
    }
    let fresh = answers.iter().filter(|a| a["replayed"] == false).count();
    assert_eq!(fresh, 1, "exactly one call writes: {answers:?}");
    let mut session = HttpSession::open(&server.url, WRITER).await;
    assert_eq!(listed(&mut session, &project).await.len(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_with_one_key_write_once_on_the_file_store() {
    concurrent_calls_with_one_key_write_once(Backend::Files).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_calls_with_one_key_write_once_on_postgres() {
    concurrent_calls_with_one_key_write_once(Backend::Postgres).await;
}

async fn a_batch_with_one_refused_entry_writes_nothing(backend: Backend) {
    let fx = Fixture::new();
    let project = fx.project("billing");
    let (server, _team) = serve(&fx, backend).await;
    let mut a = HttpSession::open(&server.url, WRITER).await;
    // An existing decision the batch would replace: it must keep its text.
    let before = a
        .tool(
            "context_save",
            json!({"project_path": s(&project), "entries": [
                {"type": "decision", "title": "Billing queue", "content": "One shared queue."}]}),
        )
        .await;
    assert_eq!(before["written"], 1, "{before}");
    let stored = listed(&mut a, &project).await;
    for key in [None, Some("batch-with-a-secret")] {
        let mut args = json!({"project_path": s(&project), "entries": [
            {"type": "knowledge", "title": "Deploy host", "content": "Deploys go to build-7."},
            {"type": "knowledge", "title": "CI credentials", "content": format!("CI uses {AWS_KEY} for S3.")},
            {"type": "decision", "title": "Billing queue", "content": "Use one queue per tenant."},
            {"type": "change", "title": "Queue split", "content": "Split the billing queue."},
        ]});
        if let Some(k) = key {
            args["idempotency_key"] = json!(k);
        }
        let r = a.tool("context_save", args).await;
        assert_eq!(r["is_error"], true, "{r}");
        assert_eq!(r["code"], "batch_refused", "{r}");
        assert_eq!(r["written"], 0, "{r}");
        let statuses: Vec<&str> = r["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["status"].as_str().unwrap())
            .collect();
        assert_eq!(
            statuses,
            ["not_written", "refused", "not_written", "not_written"]
        );
        assert_eq!(r["results"][1]["code"], "secret_refused", "{r}");
        assert!(
            !r.to_string().contains(AWS_KEY),
            "the secret is echoed: {r}"
        );
        assert_eq!(listed(&mut a, &project).await, stored, "{r}");
    }
    let found = a
        .tool(
            "context_search",
            json!({"project_path": s(&project), "query": "billing queue", "detail": "full"}),
        )
        .await;
    assert!(
        found["results"][0]["content"]
            .as_str()
            .unwrap()
            .contains("One shared queue."),
        "{found}"
    );
}

#[tokio::test]
async fn a_batch_with_one_refused_entry_writes_nothing_on_the_file_store() {
    a_batch_with_one_refused_entry_writes_nothing(Backend::Files).await;
}

#[tokio::test]
async fn a_batch_with_one_refused_entry_writes_nothing_on_postgres() {
    a_batch_with_one_refused_entry_writes_nothing(Backend::Postgres).await;
}

/// `key-` and 32 hex digits: a Mailgun key's shape, and a fine idempotency key.
const MAILGUN_SHAPED_KEY: &str = "key-0123456789abcdef0123456789abcdef";

async fn a_key_shaped_like_a_credential_comes_back_intact(backend: Backend) {
    let fx = Fixture::new();
    let project = fx.project("billing");
    let (server, _team) = serve(&fx, backend).await;
    let mut a = HttpSession::open(&server.url, WRITER).await;
    let args = json!({"project_path": s(&project), "entries": batch("first"),
                      "idempotency_key": MAILGUN_SHAPED_KEY});
    // The first answer, its replay and the refusal of the key's reuse all give it back as sent.
    let first = a.tool("context_save", args.clone()).await;
    assert_eq!(first["is_error"], false, "{first}");
    assert_eq!(first["idempotency_key"], MAILGUN_SHAPED_KEY, "{first}");
    assert!(first.get("redacted").is_none(), "{first}");
    let replay = a.tool("context_save", args.clone()).await;
    assert_eq!(replay["replayed"], true, "{replay}");
    assert_eq!(replay["idempotency_key"], MAILGUN_SHAPED_KEY, "{replay}");
    let mut changed = args;
    changed["entries"] = batch("second");
    let reused = a.tool("context_save", changed).await;
    assert_eq!(reused["code"], "idempotency_key_reused", "{reused}");
    assert_eq!(reused["idempotency_key"], MAILGUN_SHAPED_KEY, "{reused}");
    assert!(!reused.to_string().contains("[redacted"), "{reused}");

    // The same text in a memory is still a credential: refused on the way in.
    let secret = json!({"project_path": s(&project), "entries": [
        {"type": "knowledge", "title": "Mail", "content": format!("mail with {MAILGUN_SHAPED_KEY}")},
    ]});
    let refused = a.tool("context_save", secret).await;
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        !refused.to_string().contains(MAILGUN_SHAPED_KEY),
        "{refused}"
    );
}

#[tokio::test]
async fn a_key_shaped_like_a_credential_comes_back_intact_on_the_file_store() {
    a_key_shaped_like_a_credential_comes_back_intact(Backend::Files).await;
}

#[tokio::test]
async fn a_key_shaped_like_a_credential_comes_back_intact_on_postgres() {
    a_key_shaped_like_a_credential_comes_back_intact(Backend::Postgres).await;
}

/// The project's store, opened beside the server (as another writer would).
async fn store_of(
    fx: &Fixture,
    project: &Path,
    team: Option<&Arc<TestTeam>>,
) -> Box<dyn memloop_store::MemoryStore> {
    match team {
        Some(team) => Box::new(
            memloop_pg::PgMemoryStore::open(team.config(project))
                .await
                .unwrap(),
        ),
        None => {
            let dir = memloop_paths::project_dir(&fx.home, project).join("memory");
            Box::new(memloop_files::FileMemoryStore::open(&dir).unwrap())
        }
    }
}

/// Before it names an entry's memory, a save looks at what its path holds: a memory written
/// there by another writer with the entry's title is updated in place (no second memory), and
/// one of another title is refused, not replaced.
async fn a_save_updates_its_titles_memory_and_refuses_another_title(backend: Backend) {
    let fx = Fixture::new();
    let project = fx.project("billing");
    let (server, team) = serve(&fx, backend).await;
    let mut a = HttpSession::open(&server.url, WRITER).await;
    let store = store_of(&fx, &project, team.as_ref()).await;
    let doc = |title: &str, body: &str| {
        memloop_store::MemoryDoc::new(title, "d", Some(memloop_store::MemoryType::Reference), body)
    };
    // Written by another writer at the path the title names.
    store
        .write(
            "knowledge/release-train.md",
            &doc("Release train", "every second Tuesday"),
            memloop_store::WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let save = |title: &str, content: &str| {
        json!({"project_path": s(&project),
               "entries": [{"type": "knowledge", "title": title, "content": content}]})
    };
    let updated = a
        .tool("context_save", save("Release train", "every Tuesday now"))
        .await;
    assert_eq!(updated["is_error"], false, "{updated}");
    assert_eq!(
        updated["results"][0]["path"], "knowledge/release-train.md",
        "{updated}"
    );
    assert_eq!(updated["results"][0]["created"], false, "{updated}");
    assert_eq!(
        listed(&mut a, &project).await,
        ["knowledge/release-train.md"]
    );
    assert!(
        store
            .read("knowledge/release-train.md")
            .await
            .unwrap()
            .body
            .contains("every Tuesday now")
    );

    // A hand edit gives a saved memory another title.
    let first = a
        .tool("context_save", save("Deploy rota", "Ana, then Bo"))
        .await;
    assert_eq!(first["is_error"], false, "{first}");
    let path = first["results"][0]["path"].as_str().unwrap().to_owned();
    store
        .write(
            &path,
            &doc("Pager rota", "Cy"),
            memloop_store::WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let refused = a
        .tool("context_save", save("Deploy rota", "Bo, then Ana"))
        .await;
    assert_eq!(refused["is_error"], true, "{refused}");
    assert_eq!(refused["results"][0]["code"], "name_taken", "{refused}");
    assert_eq!(
        store.read(&path).await.unwrap().header.name.as_deref(),
        Some("Pager rota")
    );
}

#[tokio::test]
async fn a_save_updates_its_titles_memory_and_refuses_another_title_on_the_file_store() {
    a_save_updates_its_titles_memory_and_refuses_another_title(Backend::Files).await;
}

#[tokio::test]
async fn a_save_updates_its_titles_memory_and_refuses_another_title_on_postgres() {
    a_save_updates_its_titles_memory_and_refuses_another_title(Backend::Postgres).await;
}
