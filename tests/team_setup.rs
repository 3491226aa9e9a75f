//! `MemorySetup` with a team store: pulled at session start; an unreachable database is a clear
//! error and the agent keeps working on its local memory. Uses the machine's PostgreSQL (a fresh
//! schema, dropped with `psql` at the end).
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::core::Agent;
use memloop::core::testing::{ScriptStep, ScriptedModel};
use memloop::memory::store::{MemoryDoc, MemoryType, WriteMode};
use memloop::memory::{env::EnvVars, paths::MemoryDirResolver};
use memloop::pg::{PgConfig, PgError, PgMemoryStore};
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
