//! `memory_read {grep}`: the agent searches its memories' contents, in any script, before it
//! turns to transcripts. Real files in a temp dir, the real tool.
#![allow(clippy::unwrap_used)]

use memloop_core::tool::Tool;
use memloop_files::FileMemoryStore;
use memloop_memory::tools::MemoryReadTool;
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::tool_context;
use serde_json::json;
use std::sync::Arc;

async fn tool_with(files: &[(&str, &str, &str)]) -> (tempfile::TempDir, MemoryReadTool) {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path()).unwrap());
    for (rel, description, body) in files {
        let doc = MemoryDoc::new(*rel, *description, MemoryType::Project, *body);
        store.write(rel, &doc, WriteMode::Overwrite).await.unwrap();
    }
    (dir, MemoryReadTool::new(store))
}

#[tokio::test]
async fn grep_finds_lines_in_memory_bodies_in_any_script() {
    let (dir, tool) = tool_with(&[
        (
            "db.md",
            "database choice",
            "We moved to PostgreSQL 17.\nBackups run nightly.",
        ),
        (
            "deploy.md",
            "deploys",
            "Деплой по вторникам через Argo.\nОткат: argo rollback.",
        ),
        (
            "café.md",
            "team lunch",
            "Le déjeuner d'équipe est au Café Lumière.",
        ),
        (
            "会议.md",
            "周会",
            "每周二上午十点开周会。\n会议纪要在 Notion。",
        ),
    ])
    .await;
    let grep = |pattern: &str| {
        let input = json!({ "grep": pattern });
        let tool = tool.clone();
        async move { tool.call(input, &tool_context()).await }
    };

    // Case, width and Latin accents are folded; the line number and the path are given.
    let out = grep("ＰＯＳＴＧＲＥＳＱＬ").await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("1 memory contains"), "{}", out.content);
    assert!(out.content.contains("db.md\n"), "{}", out.content);
    assert!(
        out.content.contains(": We moved to PostgreSQL 17."),
        "{}",
        out.content
    );
    let out = grep("cafe lumiere").await;
    assert!(out.content.contains("café.md"), "{}", out.content);
    // Cyrillic and Chinese, matched inside words as grep does.
    let out = grep("ARGO").await;
    assert!(out.content.contains("deploy.md"), "{}", out.content);
    assert!(
        out.content.contains("Откат: argo rollback."),
        "{}",
        out.content
    );
    let out = grep("周会").await;
    assert!(out.content.contains("会议.md"), "{}", out.content);
    assert!(!out.content.contains("db.md"), "{}", out.content);
    // Nothing found, and nothing asked.
    let out = grep("kubernetes").await;
    assert!(
        out.content.starts_with("No memory contains"),
        "{}",
        out.content
    );
    let out = tool.call(json!({}), &tool_context()).await;
    assert!(
        out.is_error && out.content.contains("grep"),
        "{}",
        out.content
    );

    // A credential in a hand-edited file is not shown.
    std::fs::write(
        dir.path().join("creds.md"),
        "---\nname: creds\ndescription: staging access\ntype: reference\n---\n\nstaging password: Qw7zLp2Vn9xT\n",
    )
    .unwrap();
    let out = grep("staging").await;
    assert!(out.content.contains("creds.md"), "{}", out.content);
    assert!(!out.content.contains("Qw7zLp2Vn9xT"), "{}", out.content);
}

#[tokio::test]
async fn grep_answers_stay_bounded() {
    let files: Vec<(String, String)> = (0..30)
        .map(|i| (format!("note{i}.md"), "release train\n".repeat(12)))
        .collect();
    let refs: Vec<(&str, &str, &str)> = files
        .iter()
        .map(|(rel, body)| (rel.as_str(), "notes", body.as_str()))
        .collect();
    let (_dir, tool) = tool_with(&refs).await;
    let out = tool
        .call(json!({ "grep": "release" }), &tool_context())
        .await;
    assert!(
        out.content.starts_with("30 memories contain"),
        "{}",
        out.content
    );
    assert_eq!(out.content.matches(".md\n").count(), 20, "{}", out.content);
    assert!(out.content.contains("more lines match"), "{}", out.content);
    assert!(out.content.contains("Narrow the text"), "{}", out.content);
}
