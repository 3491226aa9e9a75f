//! `MemorySetup` with a team store: pulled at session start; an unreachable database is a clear
//! error and the agent keeps working on its local memory. Uses the machine's PostgreSQL (a fresh
//! schema, dropped with `psql` at the end).
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::MemoryStore;
use memloop::core::Agent;
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
use memloop::pg::{PgConfig, PgError, PgMemoryStore, SyncOptions};
use memloop::testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;
use std::time::Duration;

struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = std::process::Command::new("psql")
            .args(["-h", "127.0.0.1", "-U", "root", "-d", "test", "-c"])
            .arg(format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0))
            .output();
    }
}

fn setup(home: &std::path::Path, project: &std::path::Path) -> MemorySetup {
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.to_str().unwrap())]);
    MemorySetup::with_resolver(MemoryDirResolver::new(project), env)
        .unwrap()
        .extraction(false)
        .dream(false)
}

async fn one_turn(memory: &MemorySetup) {
    let model = ScriptedModel::new().on_purpose("main", |_| Some(ScriptStep::text("ok")));
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model)))
        .unwrap()
        .build();
    agent
        .run_turn("what are the deploy rules here?")
        .await
        .unwrap();
    assert!(agent.drain(Duration::from_secs(30)).await.completed);
}

#[tokio::test]
async fn the_team_store_is_pulled_at_session_start() {
    let schema = Schema(format!("memloop_setup_{}", std::process::id()));
    let team = PgMemoryStore::open(
        PgConfig::new("host=127.0.0.1 port=5432 user=root dbname=test", "acme/api")
            .schema(&schema.0),
    )
    .await
    .unwrap();
    team.write(
        "deploy.md",
        &MemoryDoc::new(
            "Deploys",
            "deploy rules",
            MemoryType::Project,
            "Tuesdays only.",
        ),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    let (home, project) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let memory = setup(home.path(), project.path());
    let url = format!(
        "host=127.0.0.1 port=5432 user=root dbname=test options='-c search_path={}'",
        schema.0
    );
    let sync = memory
        .connect_team(Some(&url), Some("acme/api"))
        .await
        .unwrap()
        .unwrap();
    let memory = memory.team_sync(sync);
    one_turn(&memory).await;
    let local = memory.store().unwrap().read("deploy.md").await.unwrap();
    assert_eq!(local.body, "Tuesdays only.\n");
}

#[tokio::test]
async fn an_unreachable_team_store_is_a_clear_error_and_local_memory_still_works() {
    let (home, project) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let memory = setup(home.path(), project.path());
    let err = memory
        .connect_team(
            Some("host=127.0.0.1 port=1 user=root dbname=test"),
            Some("p"),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, PgError::Connect(_)), "{err:?}");
    // No URL configured at all: no team store, no error.
    assert!(memory.connect_team(None, None).await.unwrap().is_none());
    one_turn(&memory).await;
    memory
        .store()
        .unwrap()
        .write(
            "local.md",
            &MemoryDoc::new("Local", "still works", None, "yes"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
}

#[tokio::test]
async fn with_team_memory_only_the_team_dir_is_shared_and_shown() {
    let schema = Schema(format!("memloop_setup_team_{}", std::process::id()));
    let conn = "host=127.0.0.1 port=5432 user=root dbname=test";
    let url = format!("{conn} options='-c search_path={}'", schema.0);
    // Create the schema's tables once (the test role owns the schema).
    PgMemoryStore::open(PgConfig::new(conn, "acme/web").schema(&schema.0))
        .await
        .unwrap();

    // The author's machine: one private memory, one team memory.
    let (home, project) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let memory = setup(home.path(), project.path()).team_memory(true);
    let store = memory.store().unwrap();
    store
        .write(
            "user_偏好.md",
            &MemoryDoc::new("偏好", "喜欢简短回答", MemoryType::User, "回答简短。"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    store
        .write(
            "team/部署.md",
            &MemoryDoc::new(
                "部署规则",
                "只在周二部署",
                MemoryType::Project,
                "周二下午部署，周五冻结。",
            ),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    let sync = memory
        .connect_team(Some(&url), Some("acme/web"))
        .await
        .unwrap()
        .unwrap();
    let report = sync.push(SyncOptions::default()).await.unwrap();
    assert_eq!(report.conflicts(), 0);

    // The database holds the team memory alone, under its path inside `team/`.
    let team = PgMemoryStore::open(PgConfig::new(conn, "acme/web").schema(&schema.0))
        .await
        .unwrap();
    let rows: Vec<String> = team
        .scan()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.rel_path)
        .collect();
    assert_eq!(rows, ["部署.md"]);

    // A teammate's machine pulls it into its own `team/` at session start, and the next
    // session's prompt shows it in the team index, apart from the private one.
    let (home2, project2) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mate = setup(home2.path(), project2.path()).team_memory(true);
    let sync = mate
        .connect_team(Some(&url), Some("acme/web"))
        .await
        .unwrap()
        .unwrap();
    let mate = mate.team_sync(sync);
    one_turn(&mate).await;
    let pulled = mate.store().unwrap().read("team/部署.md").await.unwrap();
    assert_eq!(pulled.body, "周二下午部署，周五冻结。\n");
    assert!(mate.store().unwrap().read("user_偏好.md").await.is_err());

    let model = Arc::new(ScriptedModel::new().on_purpose("main", |_| Some(ScriptStep::text("ok"))));
    let mut agent = mate.attach(Agent::builder(model.clone())).unwrap().build();
    agent.run_turn("部署规则是什么？").await.unwrap();
    let system = model.requests_for("main")[0].system.join("\n");
    let team_at = system.find("## Team index (team/MEMORY.md)").unwrap();
    assert!(
        system[team_at..].contains("- [部署规则](部署.md) — 只在周二部署"),
        "{system}"
    );
    assert!(system.contains("**user**: always private"));
}
