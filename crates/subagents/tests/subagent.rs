//! Sub-agents with the scripted model (which says it is scripted): the `agent` tool in the
//! foreground and the background, the child's own prompt, tools, gate and conversation, its
//! events, the depth limit, the time and iteration limits, cancellation, and extensions.

use async_trait::async_trait;
use memloop_core::events::{AgentEvent, EventAgent, EventEnvelope, SubAgentEnd, VecSink};
use memloop_core::model::ModelRequest;
use memloop_core::tool::{
    AgentKind, PermissionDecision, PermissionGate, Tool, ToolCallRequest, ToolContext, ToolEffect,
    ToolOutput, ToolSpec,
};
use memloop_core::{Agent, AgentError, CancellationToken};
use memloop_subagents::{
    AgentDefinition, BACKGROUND_RESULTS_KIND, ChildExtension, ChildKit, SubAgentConfig,
    SubAgentTool, SubAgents,
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// A read-only tool that upper-cases its input and records who called it.
#[derive(Default)]
struct Upper {
    callers: Mutex<Vec<AgentKind>>,
}

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
    async fn call(&self, input: serde_json::Value, ctx: &ToolContext) -> ToolOutput {
        if let Ok(mut callers) = self.callers.lock() {
            callers.push(ctx.agent.clone());
        }
        ToolOutput::ok(input["text"].as_str().unwrap_or_default().to_uppercase())
    }
}

/// A tool with side effects the parent's gate refuses for everybody.
struct Launch(AtomicU32);

#[async_trait]
impl Tool for Launch {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "launch".into(),
            description: "Launch the rocket".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::Other,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        self.0.fetch_add(1, Ordering::SeqCst);
        ToolOutput::ok("launched")
    }
}

/// The parent's gate: everything but `launch`.
struct NoLaunch;

#[async_trait]
impl PermissionGate for NoLaunch {
    async fn check(&self, call: &ToolCallRequest, _ctx: &ToolContext) -> PermissionDecision {
        if call.name == "launch" {
            PermissionDecision::Deny("launching is not allowed here".into())
        } else {
            PermissionDecision::Allow
        }
    }
}

/// The text of the newest tool result in a request.
fn last_tool_result(req: &ModelRequest) -> Option<(String, bool)> {
    req.messages.last()?.content.iter().find_map(|b| match b {
        memloop_core::message::ContentBlock::ToolResult {
            content, is_error, ..
        } => Some((content.text(), *is_error)),
        _ => None,
    })
}

fn after_tool_result(req: &ModelRequest) -> bool {
    last_tool_result(req).is_some()
}

fn tool_names(req: &ModelRequest) -> Vec<String> {
    req.tools.iter().map(|t| t.name.clone()).collect()
}

/// The main agent: delegates `prompt` to `agent`, then answers with what came back.
fn delegating(agent: &str, prompt: &str, background: bool) -> ScriptedModel {
    let call = json!({"agent": agent, "prompt": prompt, "background": background});
    ScriptedModel::new().on_purpose("main", move |req| {
        Some(match last_tool_result(req) {
            None => ScriptStep::tool("agent", call.clone()),
            Some((text, is_error)) => ScriptStep::text(format!("[error={is_error}] {text}")),
        })
    })
}

fn sub_events(sink: &VecSink) -> Vec<EventEnvelope> {
    sink.envelopes()
        .into_iter()
        .filter(|e| matches!(e.agent, EventAgent::SubAgent { .. }))
        .collect()
}

#[tokio::test]
async fn a_foreground_child_runs_with_its_own_prompt_tools_and_conversation() {
    let upper = Arc::new(Upper::default());
    let model = delegating("研究员", "Shout the word 'quiet'.", false).on_purpose(
        "subagent:研究员",
        |req| {
            Some(match last_tool_result(req) {
                None => ScriptStep::tool("upper", json!({"text": "quiet"})),
                Some((text, _)) => ScriptStep::text(format!("调查结果: {text}")),
            })
        },
    );
    let researcher = AgentDefinition::new("研究员", "调查する担当", "你是研究员。只用工具回答。")
        .with_tools(["upper", "no_such_tool"]);
    let sink = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(upper.clone())
        .tool(Arc::new(Launch(AtomicU32::new(0))))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(SubAgentTool::new([researcher])))
        .build();
    agent
        .run_turn("Ask the researcher. The secret is 42.")
        .await
        .unwrap();

    // The child's result came back as the tool result, and the parent answered with it.
    let last = agent.messages().last().unwrap().text();
    assert_eq!(last, "[error=false] 调查结果: QUIET");

    // The child's requests: its own system prompt, only its task (not the parent's
    // conversation), only the tools its definition lists (the unknown one skipped).
    let child = model.requests_for("subagent:研究员");
    assert_eq!(child.len(), 2);
    assert_eq!(
        child[0].system,
        vec!["你是研究员。只用工具回答。".to_owned()]
    );
    assert_eq!(child[0].messages.len(), 1);
    assert_eq!(child[0].messages[0].text(), "Shout the word 'quiet'.");
    assert!(!format!("{:?}", child[0].messages).contains("secret is 42"));
    assert_eq!(tool_names(&child[0]), vec!["upper".to_owned()]);
    // The tool ran as the sub-agent.
    assert_eq!(
        *upper.callers.lock().unwrap(),
        vec![AgentKind::SubAgent("研究员".into())]
    );
    // The main agent's tool description lists the agent.
    let main = model.requests_for("main");
    let spec = main[0].tools.iter().find(|t| t.name == "agent").unwrap();
    assert!(
        spec.description.contains("`研究员`: 调查する担当"),
        "{}",
        spec.description
    );

    // Events: the child's are stamped with its name, id and depth, in the parent's turn,
    // between one SubAgentStarted and one SubAgentFinished; the unknown tool is a warning.
    let events = sub_events(&sink);
    let EventAgent::SubAgent { name, id, depth } = events[0].agent.clone() else {
        unreachable!()
    };
    assert_eq!((name.as_str(), depth), ("研究员", 1));
    assert!(events.iter().all(|e| e.turn == 1));
    assert!(
        matches!(&events[0].event, AgentEvent::SubAgentStarted { id: i, background: false, .. } if *i == id)
    );
    assert!(matches!(
        &events.last().unwrap().event,
        AgentEvent::SubAgentFinished { end: SubAgentEnd::Completed, turns: 2, text, .. } if text == "调查结果: QUIET"
    ));
    let requests = events
        .iter()
        .filter(|e| matches!(&e.event, AgentEvent::ModelRequest { purpose, .. } if purpose == "subagent:研究员"))
        .count();
    assert_eq!(requests, 2);
    assert!(
        events.iter().any(
            |e| matches!(&e.event, AgentEvent::ToolCallFinished { name, .. } if name == "upper")
        )
    );
    assert!(
        sink.events().iter().any(
            |e| matches!(e, AgentEvent::Warning { message } if message.contains("no_such_tool"))
        )
    );
}

#[tokio::test]
async fn a_child_inherits_the_parents_tools_and_gate_when_its_definition_names_none() {
    let launch = Arc::new(Launch(AtomicU32::new(0)));
    let model = delegating("helper", "Launch it.", false).on_purpose("subagent:helper", |req| {
        Some(match last_tool_result(req) {
            None => ScriptStep::tool("launch", json!({})),
            Some((text, is_error)) => ScriptStep::text(format!("launch: {text} ({is_error})")),
        })
    });
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(launch.clone())
        .gate(Arc::new(NoLaunch))
        .subagents(Arc::new(SubAgentTool::new([AgentDefinition::new(
            "helper",
            "Helps.",
            "You help.",
        )])))
        .build();
    agent.run_turn("go").await.unwrap();
    let child = model.requests_for("subagent:helper");
    // Every tool of the parent but `agent` itself (depth limit 1).
    assert_eq!(tool_names(&child[0]), vec!["launch".to_owned()]);
    // The parent's gate applies to the child.
    assert_eq!(launch.0.load(Ordering::SeqCst), 0);
    assert_eq!(
        agent.messages().last().unwrap().text(),
        "[error=false] launch: launching is not allowed here (true)"
    );
}

#[tokio::test]
async fn a_background_childs_result_reaches_the_parent_on_its_next_turn() {
    // The child waits in a tool until the test lets it go, so the parent's first turn
    // certainly ends before the child does.
    let release = Arc::new(Notify::new());
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let seen_by_main = seen.clone();
    let model = ScriptedModel::new()
        .on_purpose("main", move |req| {
            let user = req.messages.last().unwrap();
            seen_by_main.lock().unwrap().push(user.text());
            Some(match last_tool_result(req) {
                Some((text, _)) => ScriptStep::text(format!("started: {text}")),
                None if user.text().contains("Background agent") => {
                    ScriptStep::text("The translator is done.")
                }
                None if req.messages.len() == 1 => ScriptStep::tool(
                    "agent",
                    json!({"agent": "翻訳者", "prompt": "Translate 'hello' into Japanese.", "background": true}),
                ),
                None => ScriptStep::text("no result yet"),
            })
        })
        .on_purpose("subagent:翻訳者", |req| {
            Some(match last_tool_result(req) {
                None => ScriptStep::tool("wait_for_release", json!({})),
                Some(_) => ScriptStep::text("こんにちは"),
            })
        });
    let sink = VecSink::default();
    let tool = Arc::new(SubAgentTool::new([AgentDefinition::new(
        "翻訳者",
        "翻訳します",
        "あなたは翻訳者です。",
    )]));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(Arc::new(WaitForRelease(release.clone())))
        .events(Arc::new(sink.clone()))
        .subagents(tool)
        .build();

    // Turn 1 returns while the child still runs: the tool result is the handle.
    let first = agent
        .run_turn("Translate hello, in the background.")
        .await
        .unwrap();
    assert!(
        first
            .text
            .starts_with("started: Started agent `翻訳者` in the background (id agent_"),
        "{}",
        first.text
    );
    assert!(running_child(&agent));
    assert!(
        !sink
            .events()
            .iter()
            .any(|e| matches!(e, AgentEvent::SubAgentFinished { .. }))
    );

    // The host waits for background work; the child finishes once released.
    release.notify_one();
    assert!(agent.drain(Duration::from_secs(30)).await.completed);
    let finished: Vec<AgentEvent> = sink
        .events()
        .into_iter()
        .filter(|e| matches!(e, AgentEvent::SubAgentFinished { .. }))
        .collect();
    assert!(
        matches!(&finished[..], [AgentEvent::SubAgentFinished { background: true, end: SubAgentEnd::Completed, text, .. }] if text == "こんにちは")
    );

    // Turn 2: the result is attached next to the user's message, once.
    let second = agent.run_turn("Any news?").await.unwrap();
    assert_eq!(second.text, "The translator is done.");
    let user2 = seen.lock().unwrap().last().cloned().unwrap();
    assert!(user2.starts_with("Any news?"), "{user2}");
    assert!(
        user2.contains("Background agent `翻訳者` (agent_"),
        "{user2}"
    );
    assert!(
        user2.contains("finished. Its result:\nこんにちは"),
        "{user2}"
    );
    assert!(sink.events().iter().any(
        |e| matches!(e, AgentEvent::AttachmentAdded { kind, .. } if kind == BACKGROUND_RESULTS_KIND)
    ));
    let third = agent.run_turn("And now?").await.unwrap();
    assert_eq!(third.text, "no result yet");
}

/// Whether a background sub-agent is among the agent's running tasks.
fn running_child(agent: &Agent) -> bool {
    agent
        .background()
        .running_names()
        .iter()
        .any(|n| n.starts_with("subagent-"))
}

/// A read-only tool that returns once the test releases it.
struct WaitForRelease(Arc<Notify>);

#[async_trait]
impl Tool for WaitForRelease {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: "wait_for_release".into(),
            description: "Wait".into(),
            input_schema: json!({"type": "object"}),
            effect: ToolEffect::ReadOnly,
        }
    }
    async fn call(&self, _input: serde_json::Value, _ctx: &ToolContext) -> ToolOutput {
        self.0.notified().await;
        ToolOutput::ok("released")
    }
}

#[tokio::test]
async fn sub_agents_nest_no_deeper_than_the_limit() {
    // Every agent, at every level, tries to delegate again while it has the tool.
    let again = |req: &ModelRequest| {
        Some(match last_tool_result(req) {
            Some((text, _)) => ScriptStep::text(format!("<{text}>")),
            None if tool_names(req).contains(&"agent".to_owned()) => {
                ScriptStep::tool("agent", json!({"agent": "loop", "prompt": "Go deeper."}))
            }
            None => ScriptStep::text("bottom"),
        })
    };
    let model = ScriptedModel::new()
        .on_purpose("main", again)
        .on_purpose("subagent:loop", again);
    let sink = VecSink::default();
    let tool = SubAgentTool::new([AgentDefinition::new("loop", "Delegates.", "Delegate.")]).config(
        SubAgentConfig {
            max_depth: 3,
            ..SubAgentConfig::default()
        },
    );
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(tool))
        .build();
    let out = agent.run_turn("start").await.unwrap();
    assert_eq!(out.text, "<<<bottom>>>");
    let depths: Vec<u32> = sink
        .events()
        .iter()
        .filter_map(|e| match e {
            AgentEvent::SubAgentStarted { depth, .. } => Some(*depth),
            _ => None,
        })
        .collect();
    assert_eq!(depths, vec![1, 2, 3]);
    let child = model.requests_for("subagent:loop");
    let with_tool: Vec<bool> = child
        .iter()
        .filter(|r| r.messages.len() == 1)
        .map(|r| tool_names(r).contains(&"agent".to_owned()))
        .collect();
    assert_eq!(with_tool, vec![true, true, false]);
}

#[tokio::test]
async fn a_depth_limit_of_zero_refuses_every_sub_agent() {
    let model = delegating("x", "anything", false);
    let tool = SubAgentTool::new([AgentDefinition::new("x", "X.", "X.")]).config(SubAgentConfig {
        max_depth: 0,
        ..SubAgentConfig::default()
    });
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .subagents(Arc::new(tool))
        .build();
    let out = agent.run_turn("go").await.unwrap();
    assert!(
        out.text
            .starts_with("[error=true] Sub-agents may nest at most 0 level(s) deep"),
        "{}",
        out.text
    );
    assert!(model.requests_for("subagent:x").is_empty());
}

#[tokio::test]
async fn cancelling_the_parent_cancels_a_foreground_child() {
    let asked = Arc::new(Notify::new());
    let signal = asked.clone();
    let model = delegating("slow", "Think hard.", false).on_purpose("subagent:slow", move |_| {
        signal.notify_one();
        Some(ScriptStep::Delay(
            Duration::from_secs(3600),
            Box::new(ScriptStep::text("too late")),
        ))
    });
    let sink = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(SubAgentTool::new([AgentDefinition::new(
            "slow", "Slow.", "Slow.",
        )])))
        .build();
    let cancel = CancellationToken::new();
    let canceller = cancel.clone();
    tokio::spawn(async move {
        asked.notified().await;
        canceller.cancel();
    });
    let result = agent.run_turn_with_cancel("go", cancel).await;
    assert_eq!(result, Err(AgentError::Cancelled));
    let ends: Vec<SubAgentEnd> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::SubAgentFinished { end, .. } => Some(end),
            _ => None,
        })
        .collect();
    assert_eq!(ends, vec![SubAgentEnd::Cancelled]);
    assert_eq!(model.requests_for("subagent:slow").len(), 1);
}

#[tokio::test]
async fn cancelling_the_turn_that_started_a_background_child_cancels_it() {
    let model = delegating("slow", "Think hard.", true).on_purpose("subagent:slow", |_| {
        Some(ScriptStep::Delay(
            Duration::from_secs(3600),
            Box::new(ScriptStep::text("too late")),
        ))
    });
    let sink = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(SubAgentTool::new([AgentDefinition::new(
            "slow", "Slow.", "Slow.",
        )])))
        .build();
    let cancel = CancellationToken::new();
    agent
        .run_turn_with_cancel("go", cancel.clone())
        .await
        .unwrap();
    assert!(running_child(&agent));
    cancel.cancel();
    // Without the cancellation the child would wait an hour: drain would time out.
    assert!(agent.drain(Duration::from_secs(30)).await.completed);
    assert!(sink.events().iter().any(|e| matches!(
        e,
        AgentEvent::SubAgentFinished {
            background: true,
            end: SubAgentEnd::Cancelled,
            ..
        }
    )));
}

#[tokio::test(start_paused = true)]
async fn a_child_is_stopped_by_its_time_and_iteration_limits() {
    let model = delegating("sleepy", "Wait.", false).on_purpose("subagent:sleepy", |_| {
        Some(ScriptStep::Delay(
            Duration::from_secs(3600),
            Box::new(ScriptStep::text("woke up")),
        ))
    });
    let tool = SubAgentTool::new([AgentDefinition::new("sleepy", "Sleeps.", "Sleep.")]).config(
        SubAgentConfig {
            timeout: Duration::from_secs(30),
            ..SubAgentConfig::default()
        },
    );
    let sink = VecSink::default();
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(tool))
        .build();
    let out = agent.run_turn("go").await.unwrap();
    assert!(
        out.text
            .starts_with("[error=true] Agent `sleepy` did not finish (stopped by its time limit"),
        "{}",
        out.text
    );

    // A child that never stops calling tools.
    let busy = delegating("busy", "Work.", false).on_purpose("subagent:busy", |req| {
        Some(if after_tool_result(req) {
            ScriptStep::Respond(memloop_core::model::ModelResponse::from_blocks(vec![
                memloop_core::message::ContentBlock::text("still working"),
                memloop_core::message::ContentBlock::tool_use(
                    format!("t{}", req.messages.len()),
                    "upper",
                    json!({"text": "again"}),
                ),
            ]))
        } else {
            ScriptStep::tool("upper", json!({"text": "first"}))
        })
    });
    let mut agent = Agent::builder(Arc::new(busy.clone()))
        .tool(Arc::new(Upper::default()))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(
            SubAgentTool::new([AgentDefinition::new("busy", "Busy.", "Busy.")]).config(
                SubAgentConfig {
                    max_iterations: 3,
                    ..SubAgentConfig::default()
                },
            ),
        ))
        .build();
    let out = agent.run_turn("go").await.unwrap();
    assert_eq!(busy.requests_for("subagent:busy").len(), 3);
    assert!(out.text.starts_with("[error=true] Agent `busy` did not finish (stopped by its iteration limit, after 3 model calls). Its last text:\nstill working"), "{}", out.text);
    let ends: Vec<SubAgentEnd> = sink
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::SubAgentFinished { end, .. } => Some(end),
            _ => None,
        })
        .collect();
    assert_eq!(
        ends,
        vec![SubAgentEnd::TimedOut, SubAgentEnd::MaxIterations]
    );
}

#[tokio::test]
async fn bad_calls_fail_with_a_clear_tool_error_and_start_nothing() {
    let cases = [
        (
            json!({"agent": "nobody", "prompt": "x"}),
            "Unknown agent `nobody`. Available agents: fancy, plain.",
        ),
        (
            json!({"agent": "plain", "prompt": "  "}),
            "The prompt is empty",
        ),
        (
            json!({"prompt": "x"}),
            "agent: invalid input: missing field `agent`",
        ),
    ];
    for (call, expected) in cases {
        let model = ScriptedModel::new().on_purpose("main", move |req| {
            Some(match last_tool_result(req) {
                None => ScriptStep::tool("agent", call.clone()),
                Some((text, is_error)) => ScriptStep::text(format!("[error={is_error}] {text}")),
            })
        });
        let sink = VecSink::default();
        let tool = SubAgentTool::new([
            AgentDefinition::new("plain", "Plain.", "Plain."),
            AgentDefinition::new("fancy", "Fancy.", "Fancy.").with_model("opus"),
        ])
        .model("haiku", Arc::new(ScriptedModel::new()));
        let mut agent = Agent::builder(Arc::new(model.clone()))
            .events(Arc::new(sink.clone()))
            .subagents(Arc::new(tool))
            .build();
        let out = agent.run_turn("go").await.unwrap();
        assert!(out.text.starts_with("[error=true] "), "{}", out.text);
        assert!(out.text.contains(expected), "{} lacks {expected}", out.text);
        assert!(sub_events(&sink).is_empty());
    }
}

#[tokio::test]
async fn a_definition_naming_an_unknown_model_runs_on_the_parents_with_a_warning() {
    let model = delegating("fancy", "x", false).on_purpose("subagent:fancy", |_| {
        Some(ScriptStep::text("from the parent's model"))
    });
    let sink = VecSink::default();
    let tool =
        SubAgentTool::new([AgentDefinition::new("fancy", "Fancy.", "Fancy.").with_model("opus")])
            .model("haiku", Arc::new(ScriptedModel::new()));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(tool))
        .build();
    let out = agent.run_turn("go").await.unwrap();
    assert_eq!(out.text, "[error=false] from the parent's model");
    assert!(sink.events().iter().any(|e| matches!(e, AgentEvent::Warning { message } if message.contains("agent `fancy` asks for the model `opus`, which this host does not provide (registered: haiku, inherit)"))));
}

#[tokio::test]
async fn a_definition_runs_on_the_model_it_names() {
    let small = ScriptedModel::new().on_purpose("subagent:quick", |_| {
        Some(ScriptStep::text("from the small model"))
    });
    let model = delegating("quick", "Be quick.", false);
    let tool =
        SubAgentTool::new([AgentDefinition::new("quick", "Quick.", "Quick.").with_model("haiku")])
            .model("haiku", Arc::new(small.clone()));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .subagents(Arc::new(tool))
        .build();
    let out = agent.run_turn("go").await.unwrap();
    assert_eq!(out.text, "[error=false] from the small model");
    assert_eq!(small.requests().len(), 1);
    assert!(model.requests_for("subagent:quick").is_empty());
}

/// An extension that withholds `upper` from `restricted` agents and refuses `broken` ones.
struct Restrict;

#[async_trait]
impl ChildExtension for Restrict {
    async fn equip(&self, kit: &mut ChildKit) -> Result<(), String> {
        match kit.definition.metadata.get("mode").map(String::as_str) {
            Some("restricted") => {
                kit.withhold("upper", "this agent may not shout");
                kit.system.push("You may not shout.".into());
                Ok(())
            }
            Some("broken") => Err("its mode is broken".into()),
            _ => Ok(()),
        }
    }
}

#[tokio::test]
async fn extensions_adjust_a_child_before_it_runs() {
    let upper = Arc::new(Upper::default());
    let model = delegating("quiet", "Shout.", false).on_purpose("subagent:quiet", |req| {
        Some(match last_tool_result(req) {
            None => ScriptStep::tool("upper", json!({"text": "hi"})),
            Some((text, is_error)) => ScriptStep::text(format!("{text} ({is_error})")),
        })
    });
    let tool =
        SubAgentTool::new([AgentDefinition::new("quiet", "Quiet.", "Be quiet.")
            .with_metadata("mode", "restricted")])
        .extension(Arc::new(Restrict));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .tool(upper.clone())
        .subagents(Arc::new(tool))
        .build();
    let out = agent.run_turn("go").await.unwrap();
    assert!(upper.callers.lock().unwrap().is_empty());
    assert!(
        out.text.starts_with(
            "[error=false] `upper` is not available: this agent may not shout. This agent has no tools."
        ),
        "{}",
        out.text
    );
    let child = model.requests_for("subagent:quiet");
    assert_eq!(
        child[0].system,
        vec!["Be quiet.".to_owned(), "You may not shout.".to_owned()]
    );
    assert!(!tool_names(&child[0]).contains(&"upper".to_owned()));

    let model = delegating("broken", "x", false);
    let tool = SubAgentTool::new([
        AgentDefinition::new("broken", "Broken.", "x").with_metadata("mode", "broken")
    ])
    .extension(Arc::new(Restrict));
    let mut agent = Agent::builder(Arc::new(model.clone()))
        .subagents(Arc::new(tool))
        .build();
    let out = agent.run_turn("go").await.unwrap();
    assert_eq!(
        out.text,
        "[error=true] agent `broken` could not start: its mode is broken"
    );
}

#[tokio::test]
async fn the_tool_refuses_to_run_outside_an_agent_loop() {
    let tool = SubAgentTool::new([AgentDefinition::new("x", "X.", "X.")]);
    let ctx = ToolContext {
        session_id: "s".into(),
        cwd: ".".into(),
        agent: AgentKind::Main,
        cancel: CancellationToken::new(),
    };
    let out = tool.call(json!({"agent": "x", "prompt": "p"}), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("only be started from an agent loop"));
}
