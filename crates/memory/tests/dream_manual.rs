//! Manual consolidation (`DreamHook::run_now`): gated like the stop hook unless forced, always
//! behind the same cross-process lock, no `HookContext` needed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_files::FileMemoryStore;
use memloop_memory::dream::{
    ConsolidationLock, DREAM_PURPOSE, DreamGate, DreamHook, LockAttempt, ManualDream,
};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;

fn dreaming_model() -> ScriptedModel {
    let model = ScriptedModel::new();
    model.push_for(
        DREAM_PURPOSE,
        ScriptStep::tool(
            "memory_write",
            serde_json::json!({
                "topic": "project_deploys",
                "content": "Deploys: Tuesdays and Thursdays only (merged from two notes).",
                "name": "Deploy days",
                "description": "deploy only on Tuesdays and Thursdays",
                "type": "project",
                "mode": "overwrite"
            }),
        ),
    );
    model.push_for(DREAM_PURPOSE, ScriptStep::text("merged the deploy notes"));
    model
}

#[tokio::test]
async fn gates_apply_unless_forced_and_the_lock_always_does() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(tmp.path().join("memory")).unwrap());
    let doc = MemoryDoc {
        name: "tuesday deploys".into(),
        description: "deploy on tuesdays".into(),
        memory_type: Some(MemoryType::Project),
        body: "We deploy on Tuesdays.".into(),
    };
    store
        .write("deploy_tuesday.md", &doc, WriteMode::Overwrite)
        .await
        .unwrap();
    let dream = DreamHook::new(store.clone());
    let model = dreaming_model();

    // Another holder of the lock (a live process: this one) stops even a forced run.
    let lock = ConsolidationLock::new(&store.local_dir_or_temp(memloop_store::LocalPurpose::Locks));
    let LockAttempt::Acquired(held) = lock.acquire().unwrap() else {
        panic!("the test could not take the lock")
    };
    let out = dream.run_now(Arc::new(model.clone()), true).await.unwrap();
    assert_eq!(out, ManualDream::Skipped(DreamGate::Lock));
    assert!(
        model.requests_for(DREAM_PURPOSE).is_empty(),
        "no model call"
    );
    held.rollback().unwrap();

    // No other session was touched: the session gate stops an unforced run, no model call.
    let out = dream.run_now(Arc::new(model.clone()), false).await.unwrap();
    assert_eq!(out, ManualDream::Skipped(DreamGate::Sessions));
    assert!(model.requests_for(DREAM_PURPOSE).is_empty());

    // Forced: the consolidator runs (no HookContext) and the lock records it.
    let out = dream.run_now(Arc::new(model.clone()), true).await.unwrap();
    assert_eq!(
        out,
        ManualDream::Finished {
            paths: vec!["project_deploys.md".into()]
        }
    );
    assert_eq!(model.requests_for(DREAM_PURPOSE).len(), 2);
    assert!(lock.last_consolidation().unwrap().is_some());
    assert!(
        store
            .read("project_deploys.md")
            .await
            .unwrap()
            .raw
            .contains("Tuesdays and Thursdays")
    );

    // Just consolidated: the time gate stops an unforced run.
    let out = dream.run_now(Arc::new(model.clone()), false).await.unwrap();
    assert_eq!(out, ManualDream::Skipped(DreamGate::Time));
}
