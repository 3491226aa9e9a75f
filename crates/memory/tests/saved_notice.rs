//! The saved-memories notice: off by default (only the `MemoriesSaved` event); on, the next user
//! message carries a `Memory saved: ...` reminder, once.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::{Agent, events::VecSink, message::Message};
use memloop_files::FileMemoryStore;
use memloop_memory::MemoryEvent;
use memloop_memory::extract::{
    ExtractError, ExtractionContext, ExtractionScheduler, Extractor, SchedulerConfig,
};
use memloop_store::{MemoryPath, MemoryStore};
use memloop_testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;

/// Reports one written memory per run, as a real extractor would after writing it.
struct Reports;

#[async_trait::async_trait]
impl Extractor for Reports {
    async fn extract(&self, _ctx: &ExtractionContext) -> Result<Vec<MemoryPath>, ExtractError> {
        Ok(vec![MemoryPath::new("feedback_tests.md")?])
    }
}

fn texts(m: &Message) -> String {
    m.content
        .iter()
        .filter_map(|b| b.as_text())
        .collect::<Vec<_>>()
        .join("|")
}

async fn three_turns(config: SchedulerConfig) -> (Vec<Message>, VecSink) {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());
    let scheduler = ExtractionScheduler::with_config(store, Arc::new(Reports), config);
    let events = VecSink::default();
    let model = ScriptedModel::new()
        .then(ScriptStep::text("one"))
        .then(ScriptStep::text("two"))
        .then(ScriptStep::text("three"));
    let mut agent = Agent::builder(Arc::new(model))
        .hook(Arc::new(scheduler))
        .events(Arc::new(events.clone()))
        .build();
    for turn in ["first", "second"] {
        agent.run_turn(turn).await.unwrap();
        assert!(agent.drain_default().await.completed);
    }
    // The second turn's extraction saved the same file again; the third message carries it.
    agent.run_turn("third").await.unwrap();
    (agent.messages().to_vec(), events)
}

#[tokio::test]
async fn the_notice_lands_on_the_next_user_message_when_switched_on() {
    let (messages, events) = three_turns(SchedulerConfig {
        notice_in_conversation: true,
        ..SchedulerConfig::default()
    })
    .await;
    let users: Vec<String> = messages
        .iter()
        .filter(|m| m.role == memloop_core::message::Role::User)
        .map(texts)
        .collect();
    assert_eq!(users[0], "first");
    assert_eq!(
        users[1],
        "second|<system-reminder>\nMemory saved: feedback_tests.md\n</system-reminder>"
    );
    assert_eq!(
        users[2],
        "third|<system-reminder>\nMemory saved: feedback_tests.md\n</system-reminder>"
    );
    assert!(
        events
            .events()
            .iter()
            .any(|e| matches!(e.extension(), Some(MemoryEvent::MemoriesSaved { .. })))
    );
}

#[tokio::test]
async fn by_default_only_the_event_reports_saved_memories() {
    let (messages, events) = three_turns(SchedulerConfig::default()).await;
    assert!(
        messages.iter().all(|m| !texts(m).contains("Memory saved")),
        "{messages:?}"
    );
    assert!(
        events
            .events()
            .iter()
            .any(|e| matches!(e.extension(), Some(MemoryEvent::MemoriesSaved { .. })))
    );
}
