//! Resumed sessions: an agent started from an earlier conversation (here: read back from its
//! transcript) rebuilds recall's surfaced set and byte budget from the recall attachments in it;
//! `Agent::clear` resets both.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::{
    Agent, AgentConfig,
    events::{EventSink, FanoutSink, VecSink},
};
use memloop_files::FileMemoryStore;
use memloop_recall::{LlmSelector, RecallHook, SELECTOR_PURPOSE};
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::{ScriptStep, ScriptedModel, WaitForRecall};
use memloop_transcripts::{TranscriptDir, TranscriptHook};
use std::sync::Arc;

fn selecting(path: &str) -> ScriptedModel {
    let path = path.to_owned();
    ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, move |_| {
        Some(ScriptStep::text(format!(
            r#"{{"selected_memories": ["{path}"]}}"#
        )))
    })
}

#[tokio::test]
async fn a_resumed_session_does_not_resurface_and_keeps_its_budget_until_clear() {
    resume_rebuilds(
        "feedback/tests.md",
        "integration tests must hit a real database",
        "Never mock the db.",
        [
            "how should I write the integration tests?",
            "and the database tests again?",
        ],
    )
    .await;
}

/// The same in Chinese: a memory file named in Chinese with a Chinese body (multi-byte text
/// in the attachment the rebuild parses and the budget counts).
#[tokio::test]
async fn a_resumed_chinese_session_rebuilds_the_same_way() {
    resume_rebuilds(
        "feedback/集成测试.md",
        "集成测试必须连接真实数据库",
        "不要模拟数据库；测试前先清空「测试库」。",
        ["集成测试应该怎么写？", "数据库测试再说一遍？"],
    )
    .await;
}

async fn resume_rebuilds(path: &str, description: &str, body: &str, questions: [&str; 2]) {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(tmp.path().join("memory")).unwrap());
    let title = path.trim_end_matches(".md").replace('/', " ");
    let doc = MemoryDoc::new(title, description, MemoryType::Project, body);
    store.write(path, &doc, WriteMode::Overwrite).await.unwrap();
    let transcripts = TranscriptDir::new(tmp.path());

    // Session 1: recall surfaces the memory; the transcript records the attachment.
    let model = selecting(path);
    model.push_for(
        "main",
        ScriptStep::tool(WaitForRecall::NAME, serde_json::json!({})),
    );
    model.push_for("main", ScriptStep::text("I will use a real database."));
    let settled = Arc::new(WaitForRecall::new());
    let recall1 = Arc::new(RecallHook::new(
        store.clone(),
        Arc::new(LlmSelector::new(Arc::new(model.clone()))),
    ));
    let config = AgentConfig {
        session_id: "s1".into(),
        ..AgentConfig::default()
    };
    let mut first = Agent::builder(Arc::new(model.clone()))
        .config(config.clone())
        .tool(settled.clone())
        .hook(recall1.clone())
        .hook(Arc::new(TranscriptHook::new(transcripts.clone())))
        .events(settled)
        .build();
    first.run_turn(questions[0]).await.unwrap();
    let spent = recall1.spent_bytes();
    assert!(spent > 0);
    drop(first);

    // Session 1 resumed from its transcript with a fresh recall hook.
    let history = transcripts.load("s1").unwrap().conversation();
    // This session's selector chooses nothing: whatever it surfaced was rebuilt, not chosen.
    let model = ScriptedModel::new().on_purpose(SELECTOR_PURPOSE, |_| {
        Some(ScriptStep::text(r#"{"selected_memories": []}"#))
    });
    model.push_for("main", ScriptStep::text("ok"));
    model.push_for("main", ScriptStep::text("cleared"));
    model.push_for("main", ScriptStep::text("again"));
    let recall2 = Arc::new(RecallHook::new(
        store.clone(),
        Arc::new(LlmSelector::new(Arc::new(model.clone()))),
    ));
    let events = VecSink::default();
    let sinks: Vec<Arc<dyn EventSink>> = vec![Arc::new(events.clone())];
    let mut resumed = Agent::builder(Arc::new(model.clone()))
        .config(config)
        .hook(recall2.clone())
        .events(Arc::new(FanoutSink(sinks)))
        .messages(history)
        .build();
    resumed.run_turn(questions[1]).await.unwrap();
    assert_eq!(recall2.surfaced(), [path.to_owned()].into_iter().collect());
    assert!(recall2.spent_bytes() >= spent, "the budget is not refilled");
    assert_eq!(
        recall2.spent_bytes(),
        spent,
        "counted once, as session 1 did"
    );

    resumed.clear().await;
    assert!(recall2.surfaced().is_empty());
    assert_eq!(recall2.spent_bytes(), 0);
}
