//! Files a user or another tool left in the memory dir: a stray invalid UTF-8 byte, a Latin-1
//! file, a symlink to a memory inside the dir, a binary file, a file over 1 MiB, nested paths.
//! Every memory the store lists can be read by the main agent; nothing silently vanishes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::{
    CancellationToken,
    tool::{AgentKind, Tool, ToolContext},
};
use memloop_memory::store::{FileMemoryStore, MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_memory::tools::MemoryReadTool;
use serde_json::json;
use std::sync::Arc;

fn ctx() -> ToolContext {
    ToolContext {
        session_id: "s1".into(),
        cwd: std::env::temp_dir(),
        agent: AgentKind::Main,
        cancel: CancellationToken::new(),
    }
}

#[tokio::test]
async fn odd_files_are_listed_and_read_lossily_not_hidden() {
    let dir = tempfile::tempdir().unwrap();
    let store = FileMemoryStore::open(dir.path()).unwrap();
    let p = dir.path();
    std::fs::write(
        p.join("one_bad_byte.md"),
        b"---\nname: Deploys\ndescription: deploy on tuesdays\ntype: project\n---\n\nTues\xffday\n",
    )
    .unwrap();
    std::fs::write(
        p.join("latin1.md"),
        b"---\nname: Caf\xe9\ndescription: r\xe9sum\xe9 notes\ntype: user\n---\n\nna\xefve\n",
    )
    .unwrap();
    std::fs::write(
        p.join("real.md"),
        "---\nname: Real\ndescription: the real one\ntype: user\n---\n\nreal\n",
    )
    .unwrap();
    std::os::unix::fs::symlink(p.join("real.md"), p.join("alias.md")).unwrap();
    std::fs::write(p.join("blob.md"), b"\x00\x01binary").unwrap();

    let mut listed: Vec<String> = store
        .scan()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.rel_path)
        .collect();
    listed.sort();
    assert_eq!(
        listed,
        ["alias.md", "latin1.md", "one_bad_byte.md", "real.md"]
    );

    let bad = store.read("one_bad_byte.md").await.unwrap();
    assert_eq!(bad.header.name.as_deref(), Some("Deploys"));
    assert!(bad.body.contains("Tues\u{fffd}day"));
    let latin = store.read("latin1.md").await.unwrap();
    assert_eq!(latin.header.name.as_deref(), Some("Caf\u{fffd}"));
    assert_eq!(store.read("alias.md").await.unwrap().body.trim(), "real");
}

#[tokio::test]
async fn memory_read_reads_every_listed_memory_nested_and_big_ones_cut() {
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(dir.path()).unwrap());
    let doc = MemoryDoc::new(
        "Grafana",
        "latency dashboard",
        MemoryType::Reference,
        "grafana/d/1\n",
    );
    store
        .write("team/grafana.md", &doc, WriteMode::Overwrite)
        .await
        .unwrap();
    let log = MemoryDoc::new("Log", "raw notes", MemoryType::Project, "- 10:00 shipped\n");
    store
        .write("logs/2026/04/2026-04-09.md", &log, WriteMode::Append)
        .await
        .unwrap();
    let mut big = String::from("---\nname: Big\ndescription: a huge file\ntype: project\n---\n\n");
    big.push_str(&"é".repeat(700 * 1024)); // 1.4 MB, cut mid-way
    std::fs::write(dir.path().join("big.md"), &big).unwrap();

    let tool = MemoryReadTool::new(store.clone());
    for topic in [
        "team/grafana.md",
        "team/grafana",
        "logs/2026/04/2026-04-09",
        "big",
    ] {
        let out = tool.call(json!({"topic": topic}), &ctx()).await;
        assert!(!out.is_error, "{topic}: {}", out.content);
    }
    let out = tool.call(json!({"topic": "big"}), &ctx()).await;
    assert!(out.content.len() < big.len());
    assert!(out.content.contains("[memory cut: the file is"), "cut note");
    let out = tool.call(json!({"topic": "../escape"}), &ctx()).await;
    assert!(out.is_error);
    let out = tool
        .call(json!({"topic": "team/../../escape"}), &ctx())
        .await;
    assert!(out.is_error);
}
