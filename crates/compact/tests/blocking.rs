//! The blocking limit: a request that cannot fit is refused before it is sent.

use memloop_compact::{CompactConfig, Compactor};
use memloop_core::{
    Agent, AgentError,
    compaction::ContextCompactor,
    events::{AgentEvent, VecSink},
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;

#[test]
fn admit_refuses_at_the_blocking_limit_only() {
    let cfg = CompactConfig::for_model(20_000, 2_000); // effective 18,000, blocking 15,000
    let t = cfg.thresholds();
    assert_eq!(t.blocking, 15_000);
    let c = Compactor::new(cfg);
    assert_eq!(c.admit(14_999), Ok(()));
    let refused = c.admit(15_000).unwrap_err();
    assert!(refused.contains("blocking limit of 15000"), "{refused}");
    // With compaction disabled altogether the host has opted out: nothing is refused.
    let mut off = cfg;
    off.disabled = true;
    assert_eq!(Compactor::new(off).admit(1_000_000), Ok(()));
}

#[tokio::test]
async fn an_oversized_request_is_not_sent_when_auto_compaction_is_off() {
    let mut cfg = CompactConfig::for_model(20_000, 2_000);
    cfg.auto_disabled = true;
    let model = ScriptedModel::new().then(ScriptStep::text("never sent"));
    let events = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .compactor(Arc::new(Compactor::new(cfg)))
        .events(Arc::new(events.clone()))
        .build();
    // ~16,000 tokens by the chars/4 estimate: over the 15,000 blocking limit.
    let err = agent.run_turn(&"word ".repeat(12_800)).await.unwrap_err();
    assert!(matches!(err, AgentError::ContextBlocked(_)), "{err:?}");
    assert!(
        model.requests().is_empty(),
        "the request was refused before sending"
    );
    assert!(events.events().iter().any(
        |e| matches!(e, AgentEvent::Warning { message } if message.contains("blocking limit"))
    ));
    // A small turn in a fresh agent goes through.
    let model = ScriptedModel::new().then(ScriptStep::text("fine"));
    let mut agent = Agent::builder(Arc::new(model))
        .compactor(Arc::new(Compactor::new(cfg)))
        .build();
    assert_eq!(agent.run_turn("hello").await.unwrap().text, "fine");
}
