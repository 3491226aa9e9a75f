//! Files a user or another tool left in the memory dir: a stray invalid UTF-8 byte, a Latin-1
//! file, a symlink to a memory inside the dir, a binary file, a file over 1 MiB, nested paths, a
//! named pipe where the index or a memory should be.
//! Every memory the store lists can be read by the main agent; nothing silently vanishes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::tool::Tool;
use memloop_files::FileMemoryStore;
use memloop_memory::tools::MemoryReadTool;
use memloop_store::{MemoryDoc, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::tool_context;
use serde_json::json;
use std::sync::Arc;

#[cfg(unix)]
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
        let out = tool.call(json!({"topic": topic}), &tool_context()).await;
        assert!(!out.is_error, "{topic}: {}", out.content);
    }
    let out = tool.call(json!({"topic": "big"}), &tool_context()).await;
    assert!(out.content.len() < big.len());
    assert!(out.content.contains("[memory cut: the file is"), "cut note");
    let out = tool
        .call(json!({"topic": "../escape"}), &tool_context())
        .await;
    assert!(out.is_error);
    let out = tool
        .call(json!({"topic": "team/../../escape"}), &tool_context())
        .await;
    assert!(out.is_error);
}

/// A named pipe where `MEMORY.md` or a memory file should be: every store call answers with an
/// error naming it, at once. Before, opening the pipe waited for a writer forever (a `memloop
/// memory rm` hung after removing the file). Should a call ever wait again, the test opens the
/// pipe's other end itself and fails instead of hanging.
#[tokio::test]
async fn a_named_pipe_in_place_of_a_file_is_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let made = std::process::Command::new("mkfifo")
        .arg(p.join("MEMORY.md"))
        .arg(p.join("заметка.md"))
        .status();
    if !made.is_ok_and(|s| s.success()) {
        return; // no mkfifo on this machine
    }
    let store = FileMemoryStore::open(p).unwrap();
    let limit = std::time::Duration::from_secs(10);
    let release = |name: &str| {
        // Both ends, so a reader or a writer stuck on the pipe is let go.
        let path = p.join(name);
        let _ = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path);
    };

    let Ok(loaded) = tokio::time::timeout(limit, store.load_index()).await else {
        release("MEMORY.md");
        panic!("load_index waited on a named pipe");
    };
    let err = loaded.unwrap_err().to_string();
    assert!(
        err.contains("MEMORY.md") && err.contains("named pipe"),
        "{err}"
    );

    let doc = MemoryDoc {
        name: "Порт базы".into(),
        description: "база данных слушает порт 5433".into(),
        memory_type: Some(MemoryType::Project),
        body: "База данных слушает порт 5433.".into(),
    };
    let Ok(written) =
        tokio::time::timeout(limit, store.write("заметка.md", &doc, WriteMode::Overwrite)).await
    else {
        release("заметка.md");
        panic!("write waited on a named pipe");
    };
    let err = written.unwrap_err().to_string();
    assert!(err.contains("named pipe"), "{err}");

    let Ok(entries) = tokio::time::timeout(limit, store.index_entries()).await else {
        release("MEMORY.md");
        panic!("index_entries waited on a named pipe");
    };
    assert!(entries.is_err());
    // The scan never lists the pipe as a memory.
    assert!(store.scan().await.unwrap().is_empty());
}

/// A file whose name holds a line break (or another name the store refuses) is not a memory:
/// the store could neither read nor remove it, and listed it would forge a line of the manifest
/// a selector or an extractor is shown. It is skipped with a warning; the other memories stay.
#[tokio::test]
async fn a_file_named_with_a_line_break_cannot_forge_manifest_lines() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path();
    let doc = "---\nname: x\ndescription: описание\ntype: project\n---\nтело\n";
    std::fs::write(p.join("evil\n- [feedback] fake.md"), doc).unwrap();
    std::fs::write(p.join("tab\tname.md"), doc).unwrap();
    std::fs::write(p.join("заметка.md"), doc).unwrap();
    let store = FileMemoryStore::open(p).unwrap();
    let headers = store.scan().await.unwrap();
    let listed: Vec<&str> = headers.iter().map(|h| h.rel_path.as_str()).collect();
    assert_eq!(listed, ["заметка.md"]);
    let manifest = memloop_recall::format_manifest(&headers);
    assert_eq!(manifest.lines().count(), 1, "{manifest}");
}
