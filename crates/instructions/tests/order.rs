//! Load order (later wins) across managed, user, project and local files; conditional rules;
//! the prompt section; the serialised report.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

#[path = "support/mod.rs"]
mod support;

use memloop_core::prompt::{SystemPrompt, SystemSection};
use memloop_instructions::{
    InstructionConfig, InstructionKind, InstructionLoader, InstructionsSection, LoadOptions,
    MemoryIndexText, SkipReason,
};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::{entry, write};
use tempfile::TempDir;

/// outer/ (holds a CLAUDE.md above the repository) ⊃ proj/ (git root) ⊃ pkg/ (working dir).
struct Tree {
    _dir: TempDir,
    managed: PathBuf,
    user: PathBuf,
    proj: PathBuf,
    pkg: PathBuf,
}

fn tree() -> Tree {
    let dir = TempDir::new().unwrap();
    let top = dir.path().canonicalize().unwrap();
    let managed = top.join("etc/claude");
    let user = top.join("home/.claude");
    let outer = top.join("outer");
    let proj = outer.join("proj");
    let pkg = proj.join("pkg");
    write(&managed.join("CLAUDE.md"), "managed: indent 4\n");
    write(&managed.join("rules/policy.md"), "managed rule\n");
    write(&user.join("CLAUDE.md"), "user: indent 3\n");
    write(&outer.join("CLAUDE.md"), "ABOVE THE REPO\n");
    std::fs::create_dir_all(proj.join(".git")).unwrap();
    write(&proj.join("CLAUDE.md"), "project: indent 2\n");
    write(&proj.join(".claude/CLAUDE.md"), "project dir file\n");
    write(
        &proj.join(".claude/rules/always.md"),
        "---\ndescription: x\n---\nalways rule\n",
    );
    write(
        &proj.join(".claude/rules/lang/rust.md"),
        "---\npaths:\n  - \"src/**/*.rs\"\n---\nrust rule\n",
    );
    write(
        &proj.join(".claude/rules/python.md"),
        "---\npaths: \"**/*.py\"\n---\npython rule\n",
    );
    write(&proj.join("CLAUDE.local.md"), "local: indent 1\n");
    write(&pkg.join("CLAUDE.md"), "pkg file\n");
    write(&pkg.join("CLAUDE.local.md"), "pkg local: indent 0\n");
    Tree {
        _dir: dir,
        managed,
        user,
        proj,
        pkg,
    }
}

fn config(t: &Tree) -> InstructionConfig {
    InstructionConfig::claude(&memloop_host::env::EnvVars::default())
        .with_managed_root(Some(t.managed.clone()))
        .with_user_base(Some(t.user.clone()))
        .with_home_dir(None)
}

fn options(touched: &[&str]) -> LoadOptions {
    LoadOptions {
        touched_files: touched.iter().map(PathBuf::from).collect(),
        memory_index: Some(MemoryIndexText {
            path: PathBuf::from("/mem/MEMORY.md"),
            content: "- [Tabs](tabs.md) — the user prefers tabs\n".into(),
        }),
    }
}

fn rel(t: &Tree, p: &Path) -> String {
    let top = t.managed.parent().unwrap().parent().unwrap();
    p.strip_prefix(top).unwrap_or(p).display().to_string()
}

#[test]
fn later_wins_order_from_managed_to_memory_index() {
    let t = tree();
    let loader = InstructionLoader::new(config(&t));
    assert_eq!(loader.project_root(&t.pkg).unwrap(), t.proj);
    let loaded = loader.load(&t.pkg, &options(&["../src/main.rs"])).unwrap();
    let order: Vec<(String, InstructionKind)> = loaded
        .files
        .iter()
        .map(|f| (rel(&t, &f.path), f.kind))
        .collect();
    use InstructionKind::*;
    let expected = [
        ("etc/claude/CLAUDE.md", Managed),
        ("etc/claude/rules/policy.md", Rule),
        ("home/.claude/CLAUDE.md", User),
        ("outer/proj/CLAUDE.md", Project),
        ("outer/proj/.claude/CLAUDE.md", Project),
        ("outer/proj/.claude/rules/always.md", Rule),
        ("outer/proj/.claude/rules/lang/rust.md", Rule),
        ("outer/proj/CLAUDE.local.md", Local),
        ("outer/proj/pkg/CLAUDE.md", Project),
        ("outer/proj/pkg/CLAUDE.local.md", Local),
        ("/mem/MEMORY.md", MemoryIndex),
    ];
    let expected: Vec<(String, InstructionKind)> = expected
        .iter()
        .map(|(p, k)| ((*p).to_owned(), *k))
        .collect();
    assert_eq!(order, expected);
    // The file above the git root is never considered.
    assert!(
        !loaded
            .report
            .entries
            .iter()
            .any(|e| e.path == t.proj.parent().unwrap().join("CLAUDE.md"))
    );
    // Frontmatter is gone from rules.
    assert_eq!(loaded.files[5].content, "always rule\n");
    // The python rule was considered and skipped, with its globs.
    assert_eq!(
        entry(&loaded.report, "python.md").skip_reason(),
        Some(&SkipReason::ConditionNotMet {
            paths: vec!["**/*.py".into()]
        })
    );
    // Standard locations without a file are listed as absent, not as problems.
    let absent = entry(&loaded.report, "pkg/.claude/CLAUDE.md");
    assert_eq!(absent.skip_reason(), Some(&SkipReason::Absent));
    assert_eq!(loaded.report.skipped().count(), 1);
}

#[test]
fn conditional_rules_follow_the_touched_files() {
    let t = tree();
    let loader = InstructionLoader::new(config(&t));
    let names = |touched: &[&str]| -> Vec<String> {
        loader
            .load(&t.pkg, &options(touched))
            .unwrap()
            .files
            .iter()
            .filter(|f| f.kind == InstructionKind::Rule)
            .map(|f| f.path.file_name().unwrap().to_string_lossy().into_owned())
            .collect()
    };
    assert_eq!(names(&[]), ["policy.md", "always.md"]);
    assert_eq!(names(&["tool.py"]), ["policy.md", "always.md", "python.md"]);
    let abs = t.proj.join("src/deep/x.rs");
    assert_eq!(
        names(&[abs.to_str().unwrap(), "a/b.py"]),
        ["policy.md", "always.md", "rust.md", "python.md"]
    );
    // A file outside the rules' directory matches nothing.
    assert_eq!(names(&["/elsewhere/src/x.rs"]), ["policy.md", "always.md"]);
}

#[tokio::test]
async fn section_renders_paths_and_kinds_and_reloads_when_invalidated() {
    let t = tree();
    let loader = InstructionLoader::new(config(&t));
    let loaded = loader.load(&t.pkg, &options(&[])).unwrap();
    let text = InstructionsSection::new(loaded).compute().await.unwrap();
    let managed = text.find("CLAUDE.md (managed)").unwrap();
    let local = text.find("pkg/CLAUDE.local.md (local)").unwrap();
    let index = text.find("/mem/MEMORY.md (memory index)").unwrap();
    assert!(managed < local && local < index);
    assert!(text.contains("pkg local: indent 0"));
    assert!(!text.contains("ABOVE THE REPO"));

    let mut prompt = SystemPrompt::new();
    prompt.push(Arc::new(InstructionsSection::live(
        loader,
        t.pkg.clone(),
        options(&[]),
    )));
    assert!(prompt.render().await[0].contains("pkg local: indent 0"));
    write(&t.pkg.join("CLAUDE.local.md"), "pkg local: indent 8\n");
    assert!(
        prompt.render().await[0].contains("indent 0"),
        "cached until invalidated"
    );
    prompt.invalidate_section(InstructionsSection::NAME).await;
    assert!(prompt.render().await[0].contains("pkg local: indent 8"));
}

#[test]
fn report_serialises_with_typed_reasons() {
    let t = tree();
    let loaded = InstructionLoader::new(config(&t))
        .load(&t.pkg, &options(&[]))
        .unwrap();
    let json = serde_json::to_value(&loaded.report).unwrap();
    let entries = json["entries"].as_array().unwrap();
    let python = entries
        .iter()
        .find(|e| e["path"].as_str().unwrap().ends_with("python.md"))
        .unwrap();
    assert_eq!(python["status"], "skipped");
    assert_eq!(python["reason"], "condition_not_met");
    assert_eq!(python["paths"][0], "**/*.py");
    assert_eq!(python["kind"], "rule");
    assert!(python["bytes"].as_u64().unwrap() > 0);
    let first = &entries[0];
    assert_eq!(first["status"], "loaded");
    assert_eq!(first["kind"], "managed");
    assert_eq!(json["total_tokens"], loaded.report.total_tokens);
}

#[test]
fn agents_convention_uses_its_own_names() {
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    write(&root.join("AGENTS.md"), "agents file\n");
    write(&root.join(".agents/rules/r.md"), "agents rule\n");
    write(&root.join("AGENTS.local.md"), "agents local\n");
    write(&root.join("CLAUDE.md"), "not for this convention\n");
    let config = InstructionConfig::agents(&memloop_host::env::EnvVars::default())
        .with_project_root(root)
        .with_managed_root(None)
        .with_user_base(None);
    let loaded = InstructionLoader::new(config)
        .load(root, &LoadOptions::default())
        .unwrap();
    let contents: Vec<_> = loaded.files.iter().map(|f| f.content.as_str()).collect();
    assert_eq!(
        contents,
        ["agents file\n", "agents rule\n", "agents local\n"]
    );
}
