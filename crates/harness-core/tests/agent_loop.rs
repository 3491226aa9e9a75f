//! Agent loop behaviour with the scripted model: multi-tool turns, the permission gate, the
//! iteration guard, stop hooks and drain, attachments, cancellation and forks.

use async_trait::async_trait;
use memloop_core::Hook;
use memloop_core::{
    Agent, AgentConfig, HookContext, TurnStop,
    events::{AgentEvent, VecSink},
    fork::ForkedAgentBuilder,
    hooks::{Attachment, PendingAttachment},
    invariants::check_invariants,
    message::{ContentBlock, Role},
    tool::{
        PermissionDecision, PermissionGate, Tool, ToolCallRequest, ToolContext, ToolEffect,
        ToolOutput, ToolSpec,
    },
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// A tool that upper-cases its input and counts calls.
struct Upper(AtomicU32);

#[async_trait]
impl Tool for Upper {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "upper".into(),
            description: "Upper-case text".into(),
            input_schema: json!({"type": "object", "properties": {"text": {"type": "string"}}}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        self.0.fetch_add(1, Ordering::SeqCst);
        match input.get("text").and_then(|t| t.as_str()) {
            Some(t) => ToolOutput::ok(t.to_uppercase()),
            None => ToolOutput::error("missing `text`"),
        }
    }
}

/// A tool that would delete things; used to test the gate.
struct Delete;

#[async_trait]
impl Tool for Delete {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "delete".into(),
            description: "Delete a file".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::Other,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        panic!("the gate must stop this call before it runs");
    }
}

struct DenyDelete;

#[async_trait]
impl PermissionGate for DenyDelete {
    async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        if call.name == "delete" {
            PermissionDecision::Deny("deleting is not allowed in this session".into())
        } else {
            PermissionDecision::Allow
        }
    }
}

#[tokio::test]
async fn multi_tool_turn_runs_every_call_in_order() {
    let upper = Arc::new(Upper(AtomicU32::new(0)));
    let model = ScriptedModel::new()
        .then(ScriptStep::tools(vec![
            ("upper".into(), json!({"text": "a"})),
            ("upper".into(), json!({"text": "b"})),
        ]))
        .then(ScriptStep::tool("upper", json!({"text": "c"})))
        .then(ScriptStep::text("done: A B C"));
    let events = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(upper.clone())
        .events(Arc::new(events.clone()))
        .build();
    let out = agent.run_turn("shout a, b and c").await.unwrap();
    assert_eq!(out.text, "done: A B C");
    assert_eq!(out.iterations, 3);
    assert_eq!(out.stop, TurnStop::Completed);
    assert_eq!(upper.0.load(Ordering::SeqCst), 3);
    // user, assistant(2 calls), results, assistant(1 call), result, assistant
    let roles: Vec<Role> = agent.messages().iter().map(|m| m.role).collect();
    assert_eq!(
        roles,
        vec![
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant,
            Role::User,
            Role::Assistant
        ]
    );
    let results: Vec<String> = agent.messages()[2]
        .content
        .iter()
        .map(|b| match b {
            ContentBlock::ToolResult { content, .. } => content.text(),
            other => panic!("unexpected block {other:?}"),
        })
        .collect();
    assert_eq!(results, vec!["A", "B"]);
    check_invariants(agent.messages()).unwrap();
    // The model saw the tool specs and the growing conversation.
    let reqs = model.requests();
    assert_eq!(reqs.len(), 3);
    assert_eq!(reqs[0].tools[0].name, "upper");
    assert_eq!(reqs[2].messages.len(), 5);
    let finished = events
        .events()
        .into_iter()
        .filter(|e| matches!(e, AgentEvent::ToolCallFinished { .. }))
        .count();
    assert_eq!(finished, 3);
}

#[tokio::test]
async fn denied_call_returns_a_readable_error_result() {
    let model = ScriptedModel::new()
        .then(ScriptStep::tool("delete", json!({"path": "/etc/passwd"})))
        .then(ScriptStep::text("I could not delete it."));
    let events = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(Arc::new(Delete))
        .gate(Arc::new(DenyDelete))
        .events(Arc::new(events.clone()))
        .build();
    let out = agent.run_turn("delete /etc/passwd").await.unwrap();
    assert_eq!(out.text, "I could not delete it.");
    match &agent.messages()[2].content[0] {
        ContentBlock::ToolResult {
            content, is_error, ..
        } => {
            assert!(is_error);
            assert_eq!(content.text(), "deleting is not allowed in this session");
        }
        other => panic!("expected a tool result, got {other:?}"),
    }
    assert!(events.events().contains(&AgentEvent::ToolDenied {
        name: "delete".into(),
        reason: "deleting is not allowed in this session".into()
    }));
    // The second request carried the denial to the model.
    let second = &model.requests()[1];
    assert!(second.messages[2].content[0] == agent.messages()[2].content[0]);
}

#[tokio::test]
async fn unknown_tool_is_an_error_result_not_a_crash() {
    let model = ScriptedModel::new()
        .then(ScriptStep::tool("nope", json!({})))
        .then(ScriptStep::text("ok"));
    let mut agent = Agent::builder(Arc::new(model)).build();
    agent.run_turn("call something").await.unwrap();
    match &agent.messages()[2].content[0] {
        ContentBlock::ToolResult {
            content, is_error, ..
        } => {
            assert!(is_error);
            assert!(content.text().starts_with("Unknown tool `nope`"));
        }
        other => panic!("expected a tool result, got {other:?}"),
    }
}

#[tokio::test]
async fn max_iterations_guard_stops_a_looping_model() {
    let model =
        ScriptedModel::new().rule(|_| Some(ScriptStep::tool("upper", json!({"text": "again"}))));
    let events = VecSink::default();
    let config = AgentConfig {
        max_iterations: 4,
        ..AgentConfig::default()
    };
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .config(config)
        .tool(Arc::new(Upper(AtomicU32::new(0))))
        .events(Arc::new(events.clone()))
        .build();
    let out = agent.run_turn("loop forever").await.unwrap();
    assert_eq!(out.stop, TurnStop::MaxIterations);
    assert_eq!(out.iterations, 4);
    assert_eq!(model.requests().len(), 4);
    assert!(
        events
            .events()
            .contains(&AgentEvent::MaxIterationsReached { limit: 4 })
    );
    // The conversation is still valid: every call has its result.
    check_invariants(agent.messages()).unwrap();
}

/// A stop hook that waits for a long (virtual) time, then records that it finished.
struct SlowStop {
    finished: Arc<AtomicU32>,
    started: Arc<Notify>,
}

#[async_trait::async_trait]
impl Hook for SlowStop {
    async fn on_stop(&self, _ctx: HookContext) {
        self.started.notify_one();
        tokio::time::sleep(Duration::from_secs(30)).await;
        self.finished.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test(start_paused = true)]
async fn slow_stop_hook_never_delays_the_next_turn_and_drain_waits_for_it() {
    let finished = Arc::new(AtomicU32::new(0));
    let started = Arc::new(Notify::new());
    let model = ScriptedModel::new()
        .then(ScriptStep::text("one"))
        .then(ScriptStep::text("two"));
    let mut agent = Agent::builder(Arc::new(model))
        .hook(Arc::new(SlowStop {
            finished: finished.clone(),
            started: started.clone(),
        }))
        .build();
    let t0 = tokio::time::Instant::now();
    agent.run_turn("first").await.unwrap();
    started.notified().await;
    agent.run_turn("second").await.unwrap();
    // With the clock paused, no virtual time passes unless something waits on it: both turns
    // completed while the 30 s hook was still sleeping.
    assert_eq!(t0.elapsed(), Duration::ZERO);
    assert_eq!(finished.load(Ordering::SeqCst), 0);
    assert_eq!(agent.background().running_names().len(), 2);

    // A short drain times out and names what is still running.
    let report = agent.drain(Duration::from_secs(5)).await;
    assert!(!report.completed);
    assert_eq!(report.still_running, vec!["stop-hook-0", "stop-hook-0"]);
    assert!(report.to_string().contains("stop-hook-0"));

    // A long enough drain waits for both.
    let report = agent.drain(Duration::from_secs(60)).await;
    assert!(report.completed, "{report}");
    assert_eq!(finished.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn stop_hooks_do_not_fire_when_the_guard_stops_the_turn() {
    struct Count(Arc<AtomicU32>);
    #[async_trait]
    #[async_trait::async_trait]
    impl Hook for Count {
        async fn on_stop(&self, _ctx: HookContext) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
    let fired = Arc::new(AtomicU32::new(0));
    let model =
        ScriptedModel::new().rule(|_| Some(ScriptStep::tool("upper", json!({"text": "x"}))));
    let mut agent = Agent::builder(Arc::new(model))
        .config(AgentConfig {
            max_iterations: 2,
            ..AgentConfig::default()
        })
        .tool(Arc::new(Upper(AtomicU32::new(0))))
        .hook(Arc::new(Count(fired.clone())))
        .build();
    agent.run_turn("go").await.unwrap();
    assert!(agent.drain(Duration::from_secs(1)).await.completed);
    assert_eq!(fired.load(Ordering::SeqCst), 0);
}

/// Turn-start hook whose attachment settles when `release` is notified.
struct GatedRecall {
    release: Arc<Notify>,
}

#[async_trait::async_trait]
impl Hook for GatedRecall {
    async fn on_turn_start(&self, ctx: &HookContext, user_text: &str) -> Option<PendingAttachment> {
        let release = self.release.clone();
        let text = format!("memories about: {user_text}");
        Some(PendingAttachment::spawn(
            ctx.cancel.child_token(),
            async move {
                release.notified().await;
                Some(Attachment {
                    kind: "relevant_memories".into(),
                    text,
                })
            },
        ))
    }
}

/// `fut`, or a failure naming `what` if it has not finished after a minute of tokio time. The
/// tests using it pause the clock, which then jumps ahead as soon as every task waits, so a
/// turn that blocks on an unsettled attachment fails at once instead of hanging the test run.
async fn within<T>(what: &str, fut: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), fut)
        .await
        .unwrap_or_else(|_| panic!("{what} never finished: something blocks"))
}

#[tokio::test(start_paused = true)]
async fn attachment_lands_at_the_first_check_after_it_settles() {
    let release = Arc::new(Notify::new());
    let release_in_tool = release.clone();
    // The tool releases the prefetch, so it settles between the first and second model call.
    struct Release(Arc<Notify>);
    #[async_trait]
    impl Tool for Release {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "work".into(),
                description: "work".into(),
                input_schema: json!({"type": "object"}),
                effect: ToolEffect::ReadOnly,
            }
        }
        async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
            self.0.notify_one();
            tokio::task::yield_now().await;
            ToolOutput::ok("worked")
        }
    }
    let model = ScriptedModel::new()
        .then(ScriptStep::tool("work", json!({})))
        .then(ScriptStep::text("done"));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(Arc::new(Release(release_in_tool)))
        .hook(Arc::new(GatedRecall { release }))
        .build();
    within("the turn", agent.run_turn("deploy")).await.unwrap();
    let reqs = model.requests();
    // Not there in the first request, attached to the tool-result message in the second.
    assert!(!format!("{:?}", reqs[0].messages).contains("system-reminder"));
    let carrier = &reqs[1].messages[2];
    assert!(matches!(
        carrier.content[0],
        ContentBlock::ToolResult { .. }
    ));
    assert_eq!(
        carrier.content[1].as_text().unwrap(),
        "<system-reminder>\nmemories about: deploy\n</system-reminder>"
    );
    check_invariants(agent.messages()).unwrap();
}

#[tokio::test(start_paused = true)]
async fn unsettled_attachment_is_dropped_and_cancelled_when_the_turn_ends() {
    let release = Arc::new(Notify::new());
    let cancelled = Arc::new(Notify::new());
    struct Watch(Arc<Notify>, Arc<Notify>);
    #[async_trait]
    #[async_trait::async_trait]
    impl Hook for Watch {
        async fn on_turn_start(&self, ctx: &HookContext, _t: &str) -> Option<PendingAttachment> {
            let token = ctx.cancel.child_token();
            let (release, cancelled) = (self.0.clone(), self.1.clone());
            let watch = token.clone();
            tokio::spawn(async move {
                watch.cancelled().await;
                cancelled.notify_one();
            });
            Some(PendingAttachment::spawn(token, async move {
                release.notified().await;
                None
            }))
        }
    }
    let model = ScriptedModel::new().then(ScriptStep::text("quick answer"));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .hook(Arc::new(Watch(release, cancelled.clone())))
        .build();
    // The prefetch never settles on its own: the turn must neither wait for it nor leave it
    // running.
    within(
        "a turn whose recall never settles",
        agent.run_turn("hello there"),
    )
    .await
    .unwrap();
    within(
        "cancelling the unsettled prefetch when the turn ended",
        cancelled.notified(),
    )
    .await;
    assert!(!format!("{:?}", agent.messages()).contains("system-reminder"));
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_turn_stops_the_model_call() {
    let model = ScriptedModel::new().then(ScriptStep::Delay(
        Duration::from_secs(600),
        Box::new(ScriptStep::text("too late")),
    ));
    let mut agent = Agent::builder(Arc::new(model)).build();
    let cancel = agent.session_cancellation().child_token();
    let c2 = cancel.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_secs(1)).await;
        c2.cancel();
    });
    let err = agent
        .run_turn_with_cancel("slow", cancel)
        .await
        .unwrap_err();
    assert_eq!(err, memloop_core::AgentError::Cancelled);
}

#[tokio::test]
async fn recent_tools_are_those_that_never_failed_last_turn() {
    struct See(Arc<std::sync::Mutex<Vec<Vec<String>>>>);
    #[async_trait]
    #[async_trait::async_trait]
    impl Hook for See {
        async fn on_turn_start(&self, ctx: &HookContext, _t: &str) -> Option<PendingAttachment> {
            self.0.lock().unwrap().push(ctx.recent_tools.clone());
            None
        }
    }
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let model = ScriptedModel::new()
        .then(ScriptStep::tools(vec![
            ("upper".into(), json!({"text": "ok"})),
            ("upper".into(), json!({})),  // fails: missing text
            ("delete".into(), json!({})), // denied
        ]))
        .then(ScriptStep::text("first done"))
        .then(ScriptStep::tool("upper", json!({"text": "fine"})))
        .then(ScriptStep::text("second done"))
        .then(ScriptStep::text("third"));
    let mut agent = Agent::builder(Arc::new(model))
        .tool(Arc::new(Upper(AtomicU32::new(0))))
        .tool(Arc::new(Delete))
        .gate(Arc::new(DenyDelete))
        .hook(Arc::new(See(seen.clone())))
        .build();
    agent.run_turn("one").await.unwrap();
    agent.run_turn("two").await.unwrap();
    agent.run_turn("three").await.unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen, vec![vec![], vec![], vec!["upper".to_string()]]);
}

#[tokio::test]
async fn fork_shares_the_prefix_and_reports_files_written() {
    struct Writer;
    #[async_trait]
    impl Tool for Writer {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "write".into(),
                description: "write".into(),
                input_schema: json!({"type": "object"}),
                effect: ToolEffect::WritesFiles,
            }
        }
        fn write_targets(
            &self,
            input: &serde_json::Value,
            _ctx: &ToolContext,
        ) -> Result<Vec<std::path::PathBuf>, String> {
            input
                .get("path")
                .and_then(|p| p.as_str())
                .map(|p| vec![p.into()])
                .ok_or_else(|| "no path".into())
        }
        async fn call(&self, input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
            let p = input["path"].as_str().unwrap_or_default().to_owned();
            ToolOutput::ok("written").with_file_written(p)
        }
    }
    let model = ScriptedModel::new()
        .then(ScriptStep::text("main answer"))
        .then(ScriptStep::tools(vec![
            ("write".into(), json!({"path": "/mem/a.md"})),
            ("write".into(), json!({"path": "/etc/evil.md"})),
        ]))
        .then(ScriptStep::text("saved"));
    let captured = Arc::new(std::sync::Mutex::new(None));
    struct Capture(Arc<std::sync::Mutex<Option<HookContext>>>);
    #[async_trait]
    #[async_trait::async_trait]
    impl Hook for Capture {
        async fn on_stop(&self, ctx: HookContext) {
            *self.0.lock().unwrap() = Some(ctx);
        }
    }
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .section(Arc::new(memloop_core::prompt::StaticSection::new(
            "persona",
            "You are terse.",
        )))
        .hook(Arc::new(Capture(captured.clone())))
        .build();
    agent.run_turn("hi").await.unwrap();
    assert!(agent.drain(Duration::from_secs(5)).await.completed);
    let ctx = captured.lock().unwrap().clone().unwrap();
    let gate = memloop_core::tool::WriteScopeGate::new(|p| {
        if p.starts_with("/mem/") {
            Ok(())
        } else {
            Err(format!("{} is outside /mem", p.display()))
        }
    });
    let out = ForkedAgentBuilder::new(ctx.clone(), "extractor")
        .tool(Arc::new(Writer))
        .gate(Arc::new(gate))
        .max_turns(5)
        .build()
        .run("save what matters")
        .await
        .unwrap();
    assert_eq!(out.final_text, "saved");
    assert_eq!(
        out.files_written,
        vec![std::path::PathBuf::from("/mem/a.md")]
    );
    assert_eq!(out.denied_calls, 1);
    let fork_req = &model.requests_for("extractor")[0];
    // Same system prompt and the parent's messages as prefix, then the fork's prompt.
    assert_eq!(fork_req.system, vec!["You are terse."]);
    assert_eq!(fork_req.messages.len(), 3);
    assert_eq!(fork_req.messages[0].text(), "hi");
    assert_eq!(fork_req.messages[2].text(), "save what matters");
    // The parent's transcript is untouched.
    assert_eq!(agent.messages().len(), 2);
}

#[tokio::test]
async fn fork_stops_at_max_turns() {
    let model =
        ScriptedModel::new().rule(|_| Some(ScriptStep::tool("upper", json!({"text": "x"}))));
    let base = memloop_core::HookContext {
        session_id: "s".into(),
        ..memloop_testkit::hook_context(Arc::new(model), vec![])
    };
    let out = ForkedAgentBuilder::new(base, "extractor")
        .tool(Arc::new(Upper(AtomicU32::new(0))))
        .max_turns(3)
        .build()
        .run("go")
        .await
        .unwrap();
    assert!(out.hit_max_turns);
    assert_eq!(out.turns, 3);
}

/// A fork that binds its own implementation of a tool the parent declares with the same spec
/// keeps the parent's tool list (the prefix a provider caches) and runs its own implementation;
/// a tool the parent lacks is added.
#[tokio::test]
async fn a_fork_rebinds_a_parents_tool_without_changing_the_declared_tools() {
    let model = ScriptedModel::new().on_purpose("notes", |req| {
        Some(
            if req
                .messages
                .last()
                .is_some_and(|m| m.tool_result_ids().next().is_some())
            {
                ScriptStep::text("done")
            } else {
                ScriptStep::tool("upper", json!({"text": "x"}))
            },
        )
    });
    let parents = Arc::new(Upper(AtomicU32::new(0)));
    let mut ctx = memloop_testkit::hook_context(Arc::new(model.clone()), vec![]);
    ctx.tools.register(parents.clone());
    ctx.tools.register(Arc::new(Delete));
    let own = Arc::new(Upper(AtomicU32::new(0)));
    let out = ctx
        .fork("notes")
        .tool(own.clone())
        .gate(Arc::new(DenyDelete))
        .build()
        .run("go")
        .await
        .unwrap();
    assert_eq!(out.final_text, "done");
    assert_eq!(
        (
            own.0.load(Ordering::SeqCst),
            parents.0.load(Ordering::SeqCst)
        ),
        (1, 0)
    );
    let reqs = model.requests_for("notes");
    assert!(reqs.iter().all(|r| r.tools == ctx.tools.specs()));

    struct Extra;
    #[async_trait]
    impl Tool for Extra {
        fn spec(&self) -> ToolSpec {
            ToolSpec {
                name: "extra".into(),
                description: "only the fork has it".into(),
                input_schema: json!({"type": "object"}),
                effect: ToolEffect::ReadOnly,
            }
        }
        async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
            ToolOutput::ok("")
        }
    }
    ctx.fork("notes")
        .tool(Arc::new(Extra))
        .build()
        .run("go")
        .await
        .unwrap();
    let names: Vec<String> = model
        .requests_for("notes")
        .last()
        .unwrap()
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    assert_eq!(names, ["delete", "extra", "upper"]);
}

#[tokio::test]
async fn model_errors_surface_as_typed_errors() {
    let model = ScriptedModel::new().then(ScriptStep::Fail(memloop_core::model::ModelError::Auth(
        "bad key".into(),
    )));
    let mut agent = Agent::builder(Arc::new(model)).build();
    let err = agent.run_turn("hi").await.unwrap_err();
    assert_eq!(
        err,
        memloop_core::AgentError::Model(memloop_core::model::ModelError::Auth("bad key".into()))
    );
}
