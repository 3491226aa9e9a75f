//! `MemorySetup` gives the agent the `agent` tool over the definitions on disk, each sub-agent
//! with the memory its definition asks for; the scripted model (which says it is scripted)
//! drives the real loop, real files in temp dirs.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use memloop::MemorySetup;
use memloop::core::Agent;
use memloop::core::events::{AgentEvent, EventAgent, SubAgentEnd, VecSink};
use memloop::core::model::ModelRequest;
use memloop::host::env::EnvVars;
use memloop::memory::extract::EXTRACTOR_PURPOSE;
use memloop::memory::paths::MemoryDirResolver;
use memloop::subagents::SubAgentConfig;
use memloop::testkit::{ScriptStep, ScriptedModel};
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use tempfile::TempDir;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

struct Project {
    home: TempDir,
    project: TempDir,
}

/// A project with two agent definitions (one with project memory) and a broken one.
fn project() -> Project {
    let (home, project) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let p = project.path();
    write(
        &p.join(".memloop/agents/archivist.md"),
        "---\nname: 档案员\ndescription: 记录团队的决定\nmemory: project\n---\n你负责记录决定。\n",
    );
    write(
        &p.join(".claude/agents/helper.md"),
        "---\nname: helper\ndescription: Answers quick questions.\ntools: []\n---\nYou answer briefly.\n",
    );
    write(
        &p.join(".claude/agents/broken.md"),
        "---\nname: broken\n---\nno description",
    );
    Project { home, project }
}

fn setup(p: &Project) -> MemorySetup {
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", p.home.path().to_str().unwrap())]);
    MemorySetup::with_resolver(MemoryDirResolver::new(p.project.path()), env).unwrap()
}

fn answered(req: &ModelRequest) -> bool {
    req.messages
        .last()
        .is_some_and(|m| m.tool_result_ids().next().is_some())
}

/// Delegates to the archivist, which saves one memory.
fn script() -> ScriptedModel {
    ScriptedModel::new()
        .on_purpose("main", |req| {
            Some(if answered(req) {
                ScriptStep::text("The archivist saved it.")
            } else {
                ScriptStep::tool(
                    "agent",
                    json!({"agent": "档案员", "prompt": "记录: 周二发布。"}),
                )
            })
        })
        .on_purpose("subagent:档案员", |req| {
            Some(if answered(req) {
                ScriptStep::text("已记录。")
            } else {
                ScriptStep::tool(
                    "memory_write",
                    json!({"topic": "project_release_day", "content": "周二发布。", "type": "project", "description": "发布日"}),
                )
            })
        })
        .on_purpose(EXTRACTOR_PURPOSE, |_| Some(ScriptStep::text("Nothing new to save.")))
}

#[tokio::test]
async fn memory_setup_wires_sub_agents_with_their_own_memory() {
    let p = project();
    let memory = setup(&p);
    let loaded = memory.load_agents();
    assert_eq!(loaded.definitions.len(), 2);
    assert!(
        loaded.warnings[0]
            .reason
            .contains("`description` is missing")
    );

    let model = script();
    let sink = VecSink::default();
    let builder = Agent::builder(Arc::new(model.clone())).events(Arc::new(sink.clone()));
    let mut agent = memory.attach(builder).unwrap().build();
    let out = agent
        .run_turn("Have the archivist record the release day.")
        .await
        .unwrap();
    assert_eq!(out.text, "The archivist saved it.");
    assert!(agent.drain(Duration::from_secs(30)).await.completed);

    // The tool lists both agents.
    let main = &model.requests_for("main")[0];
    let spec = main.tools.iter().find(|t| t.name == "agent").unwrap();
    assert!(
        spec.description.contains("`档案员`: 记录团队的决定"),
        "{}",
        spec.description
    );
    assert!(
        spec.description
            .contains("`helper`: Answers quick questions.")
    );

    // The archivist wrote to its project scope, not the main agent's memory dir.
    let own = p.project.path().join(".memloop/agent-memory/档案员");
    assert!(own.join("project_release_day.md").is_file());
    let parent = memory.memory_dir().unwrap().dir.clone();
    assert!(!parent.join("project_release_day.md").exists());
    let saved_by_parent: Vec<_> = std::fs::read_dir(&parent)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "md"))
        .collect();
    assert!(saved_by_parent.is_empty(), "{saved_by_parent:?}");

    // Its prompt carried its own memory section; its tools are its own memory's.
    let child = &model.requests_for("subagent:档案员")[0];
    assert_eq!(child.system[0], "你负责记录决定。");
    assert!(
        child.system[1].contains(".memloop/agent-memory/档案员"),
        "{}",
        child.system[1]
    );
    let tools: Vec<&str> = child.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(tools, ["memory_delete", "memory_read", "memory_write"]);

    // The host saw the child's events, stamped with its id.
    let stamped = sink.envelopes().into_iter().any(|e| {
        matches!(&e.agent, EventAgent::SubAgent { name, depth: 1, .. } if name == "档案员")
            && matches!(
                e.event,
                AgentEvent::ToolCallFinished {
                    is_error: false,
                    ..
                }
            )
    });
    assert!(stamped);
    assert!(sink.events().iter().any(|e| matches!(
        e,
        AgentEvent::SubAgentFinished {
            end: SubAgentEnd::Completed,
            ..
        }
    )));
}

#[tokio::test]
async fn sub_agents_are_opt_out_and_absent_without_definitions() {
    let p = project();
    let model = ScriptedModel::new().on_purpose("main", |_| Some(ScriptStep::text("ok")));
    let builder = Agent::builder(Arc::new(model.clone()));
    let mut agent = setup(&p).subagents(false).attach(builder).unwrap().build();
    agent.run_turn("hi").await.unwrap();
    assert!(
        !model.requests_for("main")[0]
            .tools
            .iter()
            .any(|t| t.name == "agent")
    );

    let empty = Project {
        home: TempDir::new().unwrap(),
        project: TempDir::new().unwrap(),
    };
    let model = ScriptedModel::new().on_purpose("main", |_| Some(ScriptStep::text("ok")));
    let builder = Agent::builder(Arc::new(model.clone()));
    let mut agent = setup(&empty)
        .subagent_config(SubAgentConfig::default())
        .attach(builder)
        .unwrap()
        .build();
    agent.run_turn("hi").await.unwrap();
    assert!(
        !model.requests_for("main")[0]
            .tools
            .iter()
            .any(|t| t.name == "agent")
    );
}

#[tokio::test]
async fn with_memory_switched_off_sub_agents_run_without_memory() {
    let p = project();
    let env = EnvVars::from_pairs([
        ("MEMLOOP_HOME", p.home.path().to_str().unwrap()),
        ("MEMLOOP_DISABLE_AUTO_MEMORY", "1"),
    ]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(p.project.path()), env).unwrap();
    let model = script();
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    agent.run_turn("Record it.").await.unwrap();
    let child = model.requests_for("subagent:档案员");
    assert_eq!(child[0].system, vec!["你负责记录决定。".to_owned()]);
    assert!(child[0].tools.is_empty());
    assert!(!p.project.path().join(".memloop/agent-memory").exists());
}

/// A sub-agent's project scope is keyed by the canonical git root: run from a subdirectory of
/// the repository, it writes where a run from the root does, not a new scope in the subdir.
#[tokio::test]
async fn a_run_from_a_subdirectory_uses_the_repositorys_scope() {
    let (home, repo) = (TempDir::new().unwrap(), TempDir::new().unwrap());
    let root = std::fs::canonicalize(repo.path()).unwrap();
    std::fs::create_dir_all(root.join(".git")).unwrap();
    let sub = root.join("services/billing");
    std::fs::create_dir_all(&sub).unwrap();
    write(
        &sub.join(".memloop/agents/archivist.md"),
        "---\nname: 档案员\ndescription: 记录团队的决定\nmemory: project\n---\n你负责记录决定。\n",
    );
    let env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
    let memory = MemorySetup::with_resolver(MemoryDirResolver::new(&sub), env).unwrap();
    let model = script();
    let mut agent = memory
        .attach(Agent::builder(Arc::new(model.clone())))
        .unwrap()
        .build();
    agent.run_turn("Record the release day.").await.unwrap();
    assert!(agent.drain(Duration::from_secs(30)).await.completed);
    let at_root = root.join(".memloop/agent-memory/档案员/project_release_day.md");
    assert!(at_root.is_file(), "not at the repository root");
    assert!(!sub.join(".memloop/agent-memory").exists());
}
