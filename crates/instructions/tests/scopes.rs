//! Agent memory scopes, on hand-made dirs and on real Claude Code agent-memory dirs.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use memloop_instructions::{
    InstructionConfig, InstructionKind, InstructionLoader, LoadOptions, MemoryIndexText,
};
use memloop_paths::{AgentMemoryScope, AgentMemoryScopes};
use tempfile::TempDir;

#[test]
fn scopes_resolve_to_their_dirs() {
    let base = TempDir::new().unwrap();
    let project = TempDir::new().unwrap();
    let scopes = AgentMemoryScopes::new(base.path(), project.path(), ".claude");
    let user = scopes
        .resolve(AgentMemoryScope::User, "code-reviewer")
        .unwrap();
    assert_eq!(user.dir, base.path().join("agent-memory/code-reviewer"));
    let shared = scopes
        .resolve(AgentMemoryScope::Project, "acme:planner")
        .unwrap();
    assert_eq!(shared.agent_type, "acme-planner");
    assert_eq!(
        shared.dir,
        project.path().join(".claude/agent-memory/acme-planner")
    );
    let local = scopes
        .resolve(AgentMemoryScope::Local, "acme:planner")
        .unwrap();
    assert_eq!(
        local.dir,
        project
            .path()
            .join(".claude/agent-memory-local/acme-planner")
    );

    // Only existing, well-named dirs are listed.
    std::fs::create_dir_all(&local.dir).unwrap();
    std::fs::create_dir_all(project.path().join(".claude/agent-memory-local/.hidden")).unwrap();
    std::fs::write(project.path().join(".claude/agent-memory-local/file"), "x").unwrap();
    let existing = scopes.existing(AgentMemoryScope::Local);
    assert_eq!(existing, vec![local]);
    assert!(scopes.existing(AgentMemoryScope::User).is_empty());
}

#[test]
fn real_agent_memory_dirs_resolve_and_load_as_the_memory_index() {
    let Some(realmem) = support::shared_dir("realmem") else {
        return;
    };
    let repo = realmem.join("InfernalRabbit__compose-envkit");
    let base = TempDir::new().unwrap();
    let scopes = AgentMemoryScopes::new(base.path(), &repo, ".claude");
    let found = scopes.existing(AgentMemoryScope::Project);
    let names: Vec<_> = found.iter().map(|d| d.agent_type.as_str()).collect();
    assert_eq!(
        names,
        ["architect", "code-reviewer", "go-engineer", "qa-engineer"]
    );
    for dir in &found {
        let resolved = scopes
            .resolve(AgentMemoryScope::Project, &dir.agent_type)
            .unwrap();
        assert_eq!(resolved.dir, dir.dir);
        assert!(resolved.dir.join("MEMORY.md").is_file());
    }

    // The sub-agent's MEMORY.md goes into its prompt as the memory index, after the instructions.
    let index_path = found[1].dir.join("MEMORY.md");
    let content = std::fs::read_to_string(&index_path).unwrap();
    let config = InstructionConfig::claude(&memloop_host::env::EnvVars::default())
        .with_project_root(&repo)
        .with_managed_root(None)
        .with_user_base(None);
    let options = LoadOptions {
        touched_files: Vec::new(),
        memory_index: Some(MemoryIndexText {
            path: index_path.clone(),
            content: content.clone(),
        }),
    };
    let loaded = InstructionLoader::new(config)
        .load(&repo, &options)
        .unwrap();
    let last = loaded.files.last().unwrap();
    assert_eq!(last.kind, InstructionKind::MemoryIndex);
    assert_eq!(last.content, content);
    assert!(loaded.report.entry(&index_path).unwrap().tokens > 0);
}
