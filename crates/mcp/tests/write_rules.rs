//! The team server's writers obey the same write rules as every other writer, with the same
//! outcome (the library's writers have their table in `crates/memory/tests/write_rules.rs`):
//! the PostgreSQL store's write of fields and of a file's text as is (`team push` and the
//! server's saves on the team store), and `memloop mcp`'s `context_save` and
//! `context_manage update`, each on a memory dir and on the PostgreSQL team store.
//!
//! The server's per-memory cap (`McpLimits::max_entry_bytes`) is the stores' own size rule: the
//! server opens its stores with it. Before, the server checked an entry's `content` against its
//! 64 KiB cap apart from the stores' 1 MiB rule on the whole text, so a save whose content fit
//! and whose frontmatter did not was stored by one and would be refused by the other.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::{McpConfig, McpLimits, ProjectStores};
use memloop_pg::PgMemoryStore;
use memloop_store::{ExpectedVersion, MemoryDoc, MemoryStore, MemoryType, WriteLimits, WriteMode};
use memloop_testkit::WriteOutcome;
use serde_json::{Value, json};
use std::sync::Arc;
use support::team::TestTeam;
use support::{Fixture, call, connect, s, save};

/// `context_manage update`'s target meaning "the memory seeded by the test".
const SEED: &str = "(seed)";

/// The size cap of every store in this test, in bytes of a memory's whole text.
const LIMIT: usize = 4096;

/// What a `context_save` answer says of its one entry.
fn save_outcome(r: &Value) -> WriteOutcome {
    if r["written"] == 1 {
        return WriteOutcome::Written;
    }
    match r["results"][0]["code"].as_str() {
        Some("secret_refused") => WriteOutcome::Secret,
        Some("too_large") => WriteOutcome::TooLarge,
        Some("invalid_path") => WriteOutcome::BadName,
        other => panic!("unexpected answer ({other:?}): {r}"),
    }
}

/// What a `context_manage update` answer says (a refusal carries the store's reason).
fn update_outcome(r: &Value) -> WriteOutcome {
    if r["is_error"] == false {
        return WriteOutcome::Written;
    }
    let reason = r["reason"].as_str().unwrap_or_default();
    if reason.contains("-byte limit") {
        WriteOutcome::TooLarge
    } else if reason.contains("credential") || reason.contains("secret") {
        WriteOutcome::Secret
    } else if reason.contains("invalid memory name") || reason.contains("refused") {
        WriteOutcome::BadName
    } else {
        panic!("unexpected answer: {r}")
    }
}

/// One rule, as each kind of writer can express it.
struct Case {
    rule: &'static str,
    /// Where a store write goes.
    to: &'static str,
    doc: MemoryDoc,
    /// `context_save`'s entry, when the rule can be reached through it (its paths come from
    /// the title, so `MEMORY.md` and `team/` cannot be named).
    entry: Option<Value>,
    /// `context_manage update`'s target and content, when the rule can be reached through it.
    update: Option<(&'static str, String)>,
    expected: WriteOutcome,
}

fn cases() -> Vec<Case> {
    let plain = |t: MemoryType, body: &str| MemoryDoc::new("Заметка", "描述 line", t, body);
    let secret = "пароль: Qw7zLp2Vn9xT";
    // Content that fits the cap alone, and not with its frontmatter.
    let big = "b".repeat(LIMIT - 16);
    vec![
        Case {
            rule: "a good memory",
            to: "team/deploy.md",
            doc: plain(MemoryType::Project, "Деплой по вторникам."),
            entry: Some(
                json!({"type": "knowledge", "title": "Деплой", "content": "Деплой по вторникам."}),
            ),
            update: Some((SEED, "Деплой по вторникам.".into())),
            expected: WriteOutcome::Written,
        },
        Case {
            rule: "user memories never go under team/",
            to: "team/me.md",
            doc: plain(MemoryType::User, "Я предпочитаю краткие ответы."),
            entry: None,
            update: None,
            expected: WriteOutcome::BadName,
        },
        Case {
            rule: "a secret in the body",
            to: "db.md",
            doc: plain(MemoryType::Project, secret),
            entry: Some(json!({"type": "knowledge", "title": "db", "content": secret})),
            update: Some((SEED, secret.into())),
            expected: WriteOutcome::Secret,
        },
        Case {
            rule: "never MEMORY.md",
            to: "MEMORY.md",
            doc: plain(MemoryType::Project, "x"),
            entry: None,
            update: Some(("MEMORY.md", "x".into())),
            expected: WriteOutcome::BadName,
        },
        Case {
            rule: "the size cap counts the whole text, frontmatter included",
            to: "big.md",
            doc: MemoryDoc::new("big", "d", MemoryType::Project, big.clone()),
            entry: Some(json!({"type": "knowledge", "title": "big", "content": big})),
            update: Some((SEED, big)),
            expected: WriteOutcome::TooLarge,
        },
    ]
}

fn config(fx: &Fixture, team: Option<&Arc<TestTeam>>) -> McpConfig {
    let mut config = fx.config();
    config.limits = McpLimits {
        max_entry_bytes: LIMIT,
        ..McpLimits::default()
    };
    config.stores = team.map(|t| t.clone() as Arc<dyn ProjectStores>);
    config
}

/// `context_save` of the case's entry into a fresh project.
async fn mcp_save(team: Option<&Arc<TestTeam>>, entry: &Value) -> WriteOutcome {
    let fx = Fixture::new();
    let client = connect(config(&fx, team)).await;
    let project = fx.project("app");
    save_outcome(&save(&client, &project, json!([entry])).await)
}

/// `context_manage update` of a saved memory (or of `MEMORY.md`), from its current version.
async fn mcp_update(team: Option<&Arc<TestTeam>>, target: &str, content: &str) -> WriteOutcome {
    let fx = Fixture::new();
    let client = connect(config(&fx, team)).await;
    let project = fx.project("app");
    let seeded = save(
        &client,
        &project,
        json!([{"type": "knowledge", "title": "seed", "content": "Deploys on Tuesdays."}]),
    )
    .await;
    assert_eq!(seeded["written"], 1, "{seeded}");
    // `SEED` names the memory just saved (wherever the server put it).
    let (target, version) = match target {
        SEED => (
            seeded["results"][0]["path"].as_str().unwrap().to_owned(),
            seeded["results"][0]["version"].clone(),
        ),
        other => (other.to_owned(), json!("0".repeat(64))),
    };
    let r = call(
        &client,
        "context_manage",
        json!({"project_path": s(&project), "action": "update", "target": target,
               "content": content, "expected_version": version}),
    )
    .await;
    update_outcome(&r)
}

#[tokio::test]
async fn the_team_servers_writers_give_the_same_outcome_for_every_rule() {
    let team = TestTeam::new();
    let limits = WriteLimits {
        max_text_bytes: LIMIT,
    };
    let mut rows = 0;
    for (i, case) in cases().into_iter().enumerate() {
        let mut got: Vec<(&str, WriteOutcome)> = Vec::new();
        // The PostgreSQL store: fields, and the file's text as is.
        let project = format!("rules-{i}");
        let store: Arc<dyn MemoryStore> = Arc::new(
            PgMemoryStore::open(
                team.config(std::path::Path::new(&format!("/srv/{project}")))
                    .write_limits(limits),
            )
            .await
            .unwrap(),
        );
        got.push((
            "postgres write",
            WriteOutcome::of(&store.write(case.to, &case.doc, WriteMode::Overwrite).await),
        ));
        let raw_store: Arc<dyn MemoryStore> = Arc::new(
            PgMemoryStore::open(
                team.config(std::path::Path::new(&format!("/srv/{project}-raw")))
                    .write_limits(limits),
            )
            .await
            .unwrap(),
        );
        got.push((
            "postgres write_raw_if",
            WriteOutcome::of(
                &raw_store
                    .write_raw_if(case.to, &case.doc.render(), &ExpectedVersion::Any)
                    .await,
            ),
        ));
        if let Some(entry) = &case.entry {
            got.push(("mcp context_save (memory dir)", mcp_save(None, entry).await));
            got.push((
                "mcp context_save (postgres)",
                mcp_save(Some(&team), entry).await,
            ));
        }
        if let Some((target, content)) = &case.update {
            got.push((
                "mcp context_manage update (memory dir)",
                mcp_update(None, target, content).await,
            ));
            got.push((
                "mcp context_manage update (postgres)",
                mcp_update(Some(&team), target, content).await,
            ));
        }
        for (writer, outcome) in got {
            assert_eq!(
                outcome, case.expected,
                "rule `{}`, writer `{writer}`",
                case.rule
            );
            rows += 1;
        }
    }
    assert_eq!(rows, 24, "every writer met every rule it can express");
}
