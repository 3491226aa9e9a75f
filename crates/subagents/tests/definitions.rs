//! Sub-agent definitions on disk: the project's and the user's dirs with the project winning,
//! malformed files skipped with a warning saying why, absent dirs; real files in temp dirs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_host::env::EnvVars;
use memloop_subagents::{AgentDirs, MAX_DEFINITION_BYTES};
use pretty_assertions::assert_eq;
use std::path::Path;
use tempfile::TempDir;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

#[test]
fn definitions_load_from_project_and_user_dirs_with_the_project_winning() {
    let project = TempDir::new().unwrap();
    let home = TempDir::new().unwrap();
    let p = project.path();
    write(
        &p.join(".memloop/agents/researcher.md"),
        "---\nname: 研究员\ndescription: 负责调查代码库并总结发现\ntools: read_file, grep\n---\n你是一名研究员。\n",
    );
    write(
        &p.join(".claude/agents/reviewer.md"),
        "---\nname: レビュアー\ndescription: 変更をレビューします。使うとき: 編集の後\nmemory: project\n---\nあなたはレビュアーです。\n",
    );
    // The user's own definition of the same name loses to the project's.
    write(
        &home.path().join(".claude/agents/reviewer.md"),
        "---\nname: レビュアー\ndescription: the user's version\n---\nUser prompt.\n",
    );
    write(
        &home.path().join(".memloop/agents/planner.md"),
        "---\nname: planner\ndescription: Plans work.\nmodel: haiku\ntools:\n  - read_file\n---\nYou plan.\n",
    );
    write(&p.join(".claude/agents/notes.txt"), "not a definition");
    let env = EnvVars::from_pairs([("HOME", home.path().to_str().unwrap())]);
    let dirs = AgentDirs::standard(p, &env);
    assert_eq!(
        dirs.dirs(),
        [
            p.join(".memloop/agents"),
            p.join(".claude/agents"),
            home.path().join(".memloop/agents"),
            home.path().join(".claude/agents"),
        ]
    );
    let loaded = dirs.load();
    let names: Vec<&str> = loaded.definitions.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(names, ["研究员", "レビュアー", "planner"]);
    let researcher = &loaded.definitions[0];
    assert_eq!(researcher.description, "负责调查代码库并总结发现");
    assert_eq!(researcher.system_prompt, "你是一名研究员。");
    assert_eq!(researcher.tools.as_deref().unwrap(), ["read_file", "grep"]);
    let reviewer = &loaded.definitions[1];
    assert_eq!(
        reviewer.description,
        "変更をレビューします。使うとき: 編集の後"
    );
    assert_eq!(reviewer.metadata["memory"], "project");
    assert_eq!(
        reviewer.source.as_deref(),
        Some(p.join(".claude/agents/reviewer.md").as_path())
    );
    assert_eq!(loaded.definitions[2].model.as_deref(), Some("haiku"));
    assert_eq!(loaded.warnings.len(), 1);
    assert!(
        loaded.warnings[0].reason.contains("already defined"),
        "{}",
        loaded.warnings[0]
    );
    assert_eq!(
        loaded.warnings[0].path,
        home.path().join(".claude/agents/reviewer.md")
    );
}

#[test]
fn malformed_definition_files_are_skipped_with_a_warning_saying_why() {
    let dir = TempDir::new().unwrap();
    let d = dir.path();
    write(
        &d.join("a_ok.md"),
        "---\nname: 良い\ndescription: works\n---\nPrompt.\n",
    );
    write(&d.join("b_nofm.md"), "Just a prompt, no frontmatter.");
    write(
        &d.join("c_unclosed.md"),
        "---\nname: x\ndescription: y\nPrompt without a closing fence.",
    );
    write(
        &d.join("d_noname.md"),
        "---\ndescription: nameless\n---\nPrompt.",
    );
    write(
        &d.join("e_scope.md"),
        "---\nname: e\ndescription: d\nmemory: everywhere\n---\nPrompt.",
    );
    write(
        &d.join("f_path.md"),
        "---\nname: ../../etc\ndescription: d\n---\nPrompt.",
    );
    std::fs::write(d.join("g_binary.md"), [0xff, 0xfe, 0x00, 0x41]).unwrap();
    write(
        &d.join("h_huge.md"),
        &format!(
            "---\nname: h\ndescription: d\n---\n{}",
            "x".repeat(MAX_DEFINITION_BYTES as usize)
        ),
    );
    write(
        &d.join("i_dup.md"),
        "---\nname: 良い\ndescription: again\n---\nPrompt.",
    );
    write(&d.join("j_empty.md"), "");
    write(
        &d.join("k_nobody.md"),
        "---\nname: k\ndescription: d\n---\n",
    );
    let loaded = AgentDirs::new().dir(d).load();
    assert_eq!(loaded.definitions.len(), 1);
    assert_eq!(loaded.definitions[0].name, "良い");
    let reasons: Vec<(String, String)> = loaded
        .warnings
        .iter()
        .map(|w| {
            (
                w.path.file_name().unwrap().to_string_lossy().into_owned(),
                w.reason.clone(),
            )
        })
        .collect();
    let expect = [
        ("b_nofm.md", "no frontmatter"),
        ("c_unclosed.md", "no frontmatter"),
        ("d_noname.md", "`name` is missing"),
        (
            "e_scope.md",
            "unknown memory scope `everywhere` (use user, project or local)",
        ),
        ("f_path.md", "invalid agent type `../../etc`"),
        ("g_binary.md", "not UTF-8"),
        ("h_huge.md", "over the 262144-byte limit"),
        ("i_dup.md", "an agent named `良い` is already defined"),
        ("j_empty.md", "no frontmatter"),
        ("k_nobody.md", "system prompt) is empty"),
    ];
    assert_eq!(reasons.len(), expect.len(), "{reasons:#?}");
    for ((file, reason), (want_file, want)) in reasons.iter().zip(expect) {
        assert_eq!(file, want_file);
        assert!(reason.contains(want), "{file}: {reason}");
    }
    // A warning names the file.
    assert!(
        loaded.warnings[0]
            .to_string()
            .contains("b_nofm.md skipped: it has no frontmatter")
    );
}

#[test]
fn absent_dirs_load_nothing_and_warn_nothing() {
    let dir = TempDir::new().unwrap();
    let loaded = AgentDirs::new().dir(dir.path().join("missing")).load();
    assert!(loaded.definitions.is_empty() && loaded.warnings.is_empty());
}
