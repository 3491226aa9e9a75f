//! The compaction policy: an ordered, composable list of strategies (the recipe "Change the
//! compaction policy" in docs/ARCHITECTURE.md points here).
#![allow(clippy::unwrap_used)]

mod common;

use async_trait::async_trait;
use common::{conversation, ctx};
use memloop_compact::policy::{
    CutStrategy, SessionMemoryStrategy, Strategy, StrategyInput, SummaryStrategy,
};
use memloop_compact::{CompactConfig, Compactor};
use memloop_core::compaction::{
    CompactionError, CompactionOutcome, CompactionStrategy, CompactionTrigger, ContextCompactor,
};
use memloop_core::events::{AgentEvent, VecSink};
use memloop_core::{Agent, invariants::check_invariants};
use memloop_testkit::{ScriptStep, ScriptedModel};
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

/// A host strategy: keep the newest `keep` messages (from a user message), or decline.
struct KeepNewest {
    keep: usize,
    calls: AtomicU32,
}

impl KeepNewest {
    fn new(keep: usize) -> Arc<Self> {
        Arc::new(Self {
            keep,
            calls: AtomicU32::new(0),
        })
    }
}

#[async_trait]
impl Strategy for KeepNewest {
    fn name(&self) -> CompactionStrategy {
        CompactionStrategy::custom("keep_newest")
    }

    async fn compact(
        &self,
        input: &StrategyInput<'_>,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if self.keep == 0 {
            return Ok(None);
        }
        let all = &input.ctx.messages;
        let kept = all[all.len().saturating_sub(self.keep)..].to_vec();
        Ok(Some(input.outcome(self.name(), kept, self.keep)))
    }
}

/// A strategy that fails outright.
struct Broken;

#[async_trait]
impl Strategy for Broken {
    fn name(&self) -> CompactionStrategy {
        CompactionStrategy::custom("broken")
    }

    async fn compact(
        &self,
        _input: &StrategyInput<'_>,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        Err(CompactionError::EmptySummary)
    }
}

fn config() -> CompactConfig {
    CompactConfig::for_model(10_000, 1_000)
}

#[tokio::test]
async fn the_default_policy_is_notes_then_summary_then_cut() {
    let names: Vec<String> = Compactor::new(config())
        .strategies()
        .iter()
        .map(|s| s.name().to_string())
        .collect();
    assert_eq!(names, ["session_memory", "summary", "cut"]);
}

#[tokio::test]
async fn a_custom_strategy_replaces_the_default_and_names_the_event() {
    let model = Arc::new(ScriptedModel::new().then(ScriptStep::text("hello")));
    let keep = KeepNewest::new(4);
    let compactor = Compactor::new(config()).with_strategies(vec![keep.clone()]);
    let (c, _) = ctx(model.clone(), conversation(3, 10), 9_000, 1);
    let out = compactor
        .maybe_compact(&c, CompactionTrigger::Auto)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        out.strategy,
        CompactionStrategy::Custom("keep_newest".into())
    );
    assert_eq!(out.messages, c.messages[8..].to_vec());
    assert_eq!(keep.calls.load(Ordering::SeqCst), 1);
    assert!(
        model.requests_for("compact_summary").is_empty(),
        "no summary call"
    );

    // Through an agent: the event carries the custom name, serialised like the built-in ones.
    let sink = VecSink::default();
    let mut agent = Agent::builder(model.clone())
        .events(Arc::new(sink.clone()))
        .compactor(Arc::new(
            Compactor::new(config()).with_strategies(vec![KeepNewest::new(1)]),
        ))
        .build();
    agent.run_turn("hi").await.unwrap();
    assert!(agent.compact_now().await.unwrap());
    let compacted: Vec<String> = sink
        .events()
        .iter()
        .filter(|e| matches!(e, AgentEvent::Compacted { .. }))
        .map(|e| serde_json::to_string(e).unwrap())
        .collect();
    assert_eq!(compacted.len(), 1);
    assert!(
        compacted[0]
            .starts_with(r#"{"event":"compacted","strategy":"keep_newest","tokens_before":"#),
        "{}",
        compacted[0]
    );
}

#[tokio::test]
async fn strategies_run_in_order_until_one_produces() {
    let model = ScriptedModel::new();
    model.push_for("compact_summary", ScriptStep::text("the summary"));
    let model = Arc::new(model);
    let declines = KeepNewest::new(0);
    let after = KeepNewest::new(2);
    let c_cfg = config();
    let compactor = Compactor::new(c_cfg).with_strategies(vec![
        declines.clone(),
        Arc::new(SummaryStrategy::new(c_cfg.summary)),
        after.clone(),
    ]);
    let (c, _) = ctx(model.clone(), conversation(3, 10), 9_000, 1);
    let out = compactor.compact(&c).await.unwrap();
    assert_eq!(out.strategy, CompactionStrategy::Summary);
    assert_eq!(declines.calls.load(Ordering::SeqCst), 1, "tried first");
    assert_eq!(after.calls.load(Ordering::SeqCst), 0, "never reached");
    check_invariants(&out.messages).unwrap();
}

#[tokio::test]
async fn without_the_summary_a_policy_goes_from_notes_straight_to_the_cut() {
    let model = Arc::new(ScriptedModel::new());
    let c_cfg = CompactConfig::for_model(40_000, 1_000);
    let compactor = Compactor::new(c_cfg).with_strategies(vec![
        Arc::new(SessionMemoryStrategy::new(None, c_cfg.session_memory)),
        Arc::new(CutStrategy),
    ]);
    let conv = conversation(160, 400);
    let tokens =
        memloop_core::tokens::estimate_messages(&memloop_core::tokens::CharEstimator, &conv);
    let (c, _) = ctx(model.clone(), conv.clone(), tokens + 500, 1);
    let out = compactor.compact(&c).await.unwrap();
    assert_eq!(out.strategy, CompactionStrategy::Cut);
    assert!(
        out.messages.len() < conv.len(),
        "the oldest turns were dropped"
    );
    assert!(out.tokens_after < compactor.thresholds().auto_compact);
    assert!(model.requests().is_empty(), "no model call at all");
}

#[tokio::test]
async fn an_error_stops_the_policy_and_all_declining_is_an_error() {
    let model = Arc::new(ScriptedModel::new());
    let after = KeepNewest::new(2);
    let compactor = Compactor::new(config()).with_strategies(vec![Arc::new(Broken), after.clone()]);
    let (c, _) = ctx(model.clone(), conversation(3, 10), 9_000, 1);
    assert_eq!(
        compactor.compact(&c).await,
        Err(CompactionError::EmptySummary)
    );
    assert_eq!(after.calls.load(Ordering::SeqCst), 0);

    let none = Compactor::new(config()).with_strategies(vec![KeepNewest::new(0)]);
    assert_eq!(
        none.compact(&c).await,
        Err(CompactionError::Declined("keep_newest".into()))
    );
}

/// A strategy whose own request never fits.
struct TooBig;

#[async_trait]
impl Strategy for TooBig {
    fn name(&self) -> CompactionStrategy {
        CompactionStrategy::custom("too_big")
    }

    async fn compact(
        &self,
        _input: &StrategyInput<'_>,
    ) -> Result<Option<CompactionOutcome>, CompactionError> {
        Err(CompactionError::TooLong {
            dropped_attempts: 3,
        })
    }
}

#[tokio::test]
async fn a_strategy_that_does_not_fit_hands_over_and_its_error_is_kept_for_the_end() {
    let model = Arc::new(ScriptedModel::new());
    let (c, _) = ctx(model, conversation(3, 10), 9_000, 1);
    let then = Compactor::new(config()).with_strategies(vec![Arc::new(TooBig), KeepNewest::new(2)]);
    assert_eq!(
        then.compact(&c).await.unwrap().strategy,
        CompactionStrategy::custom("keep_newest")
    );
    let alone =
        Compactor::new(config()).with_strategies(vec![Arc::new(TooBig), KeepNewest::new(0)]);
    assert_eq!(
        alone.compact(&c).await,
        Err(CompactionError::TooLong {
            dropped_attempts: 3
        })
    );
}
