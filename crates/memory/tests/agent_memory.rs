//! Sub-agent memory, with real files in temp dirs and the scripted model (which says it is
//! scripted) driving a real agent loop.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::Agent;
use memloop_core::events::{AgentEvent, SubAgentEnd, VecSink};
use memloop_core::message::ContentBlock;
use memloop_core::model::ModelRequest;
use memloop_files::FileMemoryStore;
use memloop_memory::agent_memory::AgentMemory;
use memloop_memory::tools::memory_tools;
use memloop_paths::AgentMemoryScopes;
use memloop_store::MemoryStore;
use memloop_subagents::{AgentDirs, SubAgentTool, SubAgents};
use memloop_testkit::{ScriptStep, ScriptedModel};
use memloop_tools::WriteFile;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use tempfile::TempDir;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// Every file under `dir`, relative, sorted (empty when it does not exist).
fn files_under(dir: &Path) -> Vec<PathBuf> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                walk(root, &p, out);
            } else {
                out.push(p.strip_prefix(root).unwrap().to_path_buf());
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// The tool results a sub-agent got, from its last request.
fn child_results(req: &ModelRequest) -> Vec<(String, bool)> {
    req.messages
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                content, is_error, ..
            } => Some((content.text(), *is_error)),
            _ => None,
        })
        .collect()
}

/// A script that plays `steps` in order, one per request of the sub-agent.
fn in_order(steps: Vec<ScriptStep>) -> impl Fn(&ModelRequest) -> Option<ScriptStep> {
    move |req| steps.get((req.messages.len() - 1) / 2).cloned()
}

struct World {
    project: TempDir,
    home: TempDir,
    parent_dir: PathBuf,
    parent: Arc<dyn MemoryStore>,
    scopes: AgentMemoryScopes,
}

fn world() -> World {
    let project = TempDir::new().unwrap();
    let home = TempDir::new().unwrap();
    let parent_dir = home.path().join("projects/p/memory");
    let parent: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(&parent_dir).unwrap());
    let scopes = AgentMemoryScopes::new(home.path(), project.path(), ".memloop");
    World {
        parent_dir: std::fs::canonicalize(&parent_dir).unwrap(),
        project,
        home,
        parent,
        scopes,
    }
}

/// The main agent (with its memory tools and `write_file`) delegating `prompt` to `agent`.
fn run_parent(
    w: &World,
    definition: &str,
    agent: &str,
    child: Vec<ScriptStep>,
) -> (
    ScriptedModel,
    VecSink,
    impl std::future::Future<Output = ()> + use<>,
) {
    let file = w.project.path().join(".memloop/agents/def.md");
    write(&file, definition);
    let loaded = AgentDirs::new().dir(file.parent().unwrap()).load();
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
    let call = json!({"agent": agent, "prompt": "Remember that deploys happen on Tuesdays."});
    let model = ScriptedModel::new()
        .on_purpose("main", move |req| {
            let answered = req
                .messages
                .last()
                .unwrap()
                .tool_result_ids()
                .next()
                .is_some();
            Some(if answered {
                ScriptStep::text("done")
            } else {
                ScriptStep::tool("agent", call.clone())
            })
        })
        .on_purpose(&format!("subagent:{agent}"), in_order(child));
    let sink = VecSink::default();
    let tool = SubAgentTool::new(loaded.definitions).extension(Arc::new(
        AgentMemory::new(w.scopes.clone()).protect(&w.parent_dir),
    ));
    let mut builder = Agent::builder(Arc::new(model.clone()))
        .tool(Arc::new(WriteFile))
        .events(Arc::new(sink.clone()))
        .subagents(Arc::new(tool));
    for t in memory_tools(w.parent.clone()) {
        builder = builder.tool(t);
    }
    let mut parent = builder.build();
    let run = async move {
        let out = parent
            .run_turn("Ask the agent to remember the deploy day.")
            .await
            .unwrap();
        assert_eq!(out.text, "done");
    };
    (model, sink, run)
}

fn memory_write(topic: &str, content: &str) -> ScriptStep {
    ScriptStep::tool(
        "memory_write",
        json!({"topic": topic, "content": content, "type": "project", "description": "deploy day"}),
    )
}

fn write_file(path: &Path) -> ScriptStep {
    ScriptStep::tool(
        "write_file",
        json!({"path": path.to_str().unwrap(), "content": "x"}),
    )
}

#[tokio::test]
async fn a_child_with_project_memory_writes_its_own_scope_and_leaves_the_parents_alone() {
    let w = world();
    let own_dir = w.project.path().join(".memloop/agent-memory/記録係");
    let other_agent = w.project.path().join(".memloop/agent-memory/someone/x.md");
    let (model, sink, run) = run_parent(
        &w,
        "---\nname: 記録係\ndescription: 決定事項を記録する\nmemory: project\n---\nあなたは記録係です。\n",
        "記録係",
        vec![
            memory_write("project_deploys", "デプロイは火曜日のみ。"),
            write_file(&w.parent_dir.join("sneaky.md")),
            write_file(&own_dir.join("unchecked.md")),
            write_file(&other_agent),
            ScriptStep::text("記録しました。"),
        ],
    );
    run.await;

    // Its memory went to its own scope, through the store (file and index line).
    let saved = std::fs::read_to_string(own_dir.join("project_deploys.md")).unwrap();
    assert!(
        saved.contains("デプロイは火曜日のみ。") && saved.contains("type: project"),
        "{saved}"
    );
    let index = std::fs::read_to_string(own_dir.join("MEMORY.md")).unwrap();
    assert!(index.contains("project_deploys.md"), "{index}");
    let memories: Vec<PathBuf> = files_under(&own_dir)
        .into_iter()
        .filter(|p| !p.to_string_lossy().starts_with('.')) // the store's lock file
        .collect();
    assert_eq!(
        memories,
        [
            PathBuf::from("MEMORY.md"),
            PathBuf::from("project_deploys.md")
        ]
    );
    // The parent's memory dir is untouched, and no other agent's dir was created.
    assert!(
        files_under(&w.parent_dir).is_empty(),
        "{:?}",
        files_under(&w.parent_dir)
    );
    assert!(!other_agent.parent().unwrap().exists());

    let child = model.requests_for("subagent:記録係");
    // Its prompt: its definition, then the memory section for its own dir.
    assert_eq!(child[0].system[0], "あなたは記録係です。");
    let own_canonical = std::fs::canonicalize(&own_dir).unwrap();
    assert!(
        child[0].system[1].contains(own_canonical.to_str().unwrap()),
        "{}",
        child[0].system[1]
    );
    // Its scope line: project memory is shared with the team through version control.
    assert!(
        child[0].system[1].contains(
            "## Scope of this memory\n\nThis is project-scope memory: it lives in the project \
             and is shared with the team through version control"
        ),
        "{}",
        child[0].system[1]
    );
    let tools: Vec<String> = child[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(
        tools,
        ["memory_delete", "memory_read", "memory_write", "write_file"]
    );
    let results = child_results(child.last().unwrap());
    assert_eq!(results[0].1, false, "{}", results[0].0);
    assert!(
        results[1]
            .0
            .starts_with("Permission denied: agent `記録係` may not write inside the memory dir"),
        "{}",
        results[1].0
    );
    assert!(
        results[2]
            .0
            .contains("writes its memory only with memory_write and memory_delete"),
        "{}",
        results[2].0
    );
    assert!(
        results[3].0.contains("may not write inside the memory dir")
            && results[3].0.contains("its own memory is"),
        "{}",
        results[3].0
    );
    assert!(results[1..].iter().all(|(_, is_error)| *is_error));
    assert!(sink.events().iter().any(|e| matches!(e, AgentEvent::SubAgentFinished { end: SubAgentEnd::Completed, text, .. } if text == "記録しました。")));
}

#[tokio::test]
async fn a_child_without_memory_cannot_write_any() {
    let w = world();
    let (model, _sink, run) = run_parent(
        &w,
        "---\nname: helper\ndescription: Helps.\n---\nYou help.\n",
        "helper",
        vec![
            memory_write("project_deploys", "Deploys on Tuesdays."),
            ScriptStep::tool("memory_read", json!({"topic": "MEMORY"})),
            write_file(&w.parent_dir.join("project_deploys.md")),
            write_file(
                &w.project
                    .path()
                    .join(".memloop/agent-memory-local/helper/x.md"),
            ),
            ScriptStep::text("I could not save it."),
        ],
    );
    run.await;
    let child = model.requests_for("subagent:helper");
    let tools: Vec<String> = child[0].tools.iter().map(|t| t.name.clone()).collect();
    assert_eq!(tools, ["write_file"]);
    assert_eq!(child[0].system, vec!["You help.".to_owned()]);
    let results = child_results(child.last().unwrap());
    assert!(results.iter().all(|(_, is_error)| *is_error), "{results:?}");
    assert!(results[0].0.starts_with("`memory_write` is not available: agent `helper` has no memory (its definition sets no `memory:` scope"), "{}", results[0].0);
    assert!(
        results[1].0.starts_with("`memory_read` is not available"),
        "{}",
        results[1].0
    );
    assert!(
        results[2]
            .0
            .starts_with("Permission denied: agent `helper` may not write inside the memory dir")
            && results[2].0.contains("it has no memory"),
        "{}",
        results[2].0
    );
    assert!(
        results[3].0.starts_with("Permission denied"),
        "{}",
        results[3].0
    );
    // Nothing on disk.
    assert!(files_under(&w.parent_dir).is_empty());
    assert!(!w.project.path().join(".memloop/agent-memory").exists());
    assert!(
        !w.project
            .path()
            .join(".memloop/agent-memory-local")
            .exists()
    );
    assert!(
        files_under(w.scopes.project_root())
            .iter()
            .all(|p| p.starts_with(".memloop/agents"))
    );
}

#[cfg(unix)]
#[tokio::test]
async fn a_symlink_into_the_parents_memory_does_not_get_a_child_past_the_gate() {
    let w = world();
    let link = w.project.path().join("innocent");
    std::os::unix::fs::symlink(&w.parent_dir, &link).unwrap();
    let (model, _sink, run) = run_parent(
        &w,
        "---\nname: helper\ndescription: Helps.\n---\nYou help.\n",
        "helper",
        vec![write_file(&link.join("x.md")), ScriptStep::text("ok")],
    );
    run.await;
    let results = child_results(model.requests_for("subagent:helper").last().unwrap());
    assert!(
        results[0].1 && results[0].0.contains("may not write inside the memory dir"),
        "{results:?}"
    );
    assert!(files_under(&w.parent_dir).is_empty());
}

#[tokio::test]
async fn user_and_local_scopes_resolve_to_their_own_dirs() {
    for (scope, dir) in [
        ("user", "agent-memory/scribe"),
        ("local", ".memloop/agent-memory-local/scribe"),
    ] {
        let w = world();
        let (model, _sink, run) = run_parent(
            &w,
            &format!("---\nname: scribe\ndescription: Writes.\nmemory: {scope}\n---\nWrite.\n"),
            "scribe",
            vec![
                memory_write("user_prefs", "Prefers short answers."),
                ScriptStep::text("ok"),
            ],
        );
        run.await;
        let base = if scope == "user" {
            w.home.path()
        } else {
            w.project.path()
        };
        assert!(base.join(dir).join("user_prefs.md").is_file(), "{scope}");
        let system = model.requests_for("subagent:scribe")[0].system.join("\n");
        let line = match scope {
            "user" => "keep what you learn general",
            _ => "stays on this machine only and is not checked in",
        };
        assert!(system.contains(line), "{scope}: {system}");
        assert!(files_under(&w.parent_dir).is_empty());
    }
}
