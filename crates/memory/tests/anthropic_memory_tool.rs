//! Anthropic's `memory_20250818` command set on a real `FileMemoryStore` in a tempdir: each
//! command, the index kept in step, and refusals (escapes, symlinks, secrets, the index itself).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::tool::{Tool, ToolOutput};
use memloop_files::FileMemoryStore;
use memloop_memory::tools::{ANTHROPIC_MEMORY_TOOL, AnthropicMemoryTool};
use memloop_store::MemoryStore;
use memloop_testkit::tool_context;
use serde_json::{Value, json};
use std::sync::Arc;

struct Fx {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    store: Arc<FileMemoryStore>,
    tool: AnthropicMemoryTool,
}

fn fx() -> Fx {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("mem");
    let store = Arc::new(FileMemoryStore::open(&root).unwrap());
    let tool = AnthropicMemoryTool::new(store.clone());
    Fx {
        _tmp: tmp,
        root,
        store,
        tool,
    }
}

async fn run(fx: &Fx, input: Value) -> ToolOutput {
    fx.tool.call(input, &tool_context()).await
}

fn index(fx: &Fx) -> String {
    std::fs::read_to_string(fx.root.join("MEMORY.md")).unwrap_or_default()
}

#[tokio::test]
async fn every_command_goes_through_the_store_and_keeps_the_index() {
    let fx = fx();
    assert_eq!(fx.tool.spec().name, ANTHROPIC_MEMORY_TOOL);
    let out = run(
        &fx,
        json!({"command": "create", "path": "/memories/notes/progress.md",
               "file_text": "# Migration progress\nstep 1 done\nstep 2 pending\n"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.files_written.len(), 1);
    assert!(index(&fx).contains("notes/progress.md"));
    let file = fx.store.read("notes/progress.md").await.unwrap();
    assert_eq!(
        file.header.description.as_deref(),
        Some("Migration progress")
    );

    let out = run(
        &fx,
        json!({"command": "str_replace", "path": "/memories/notes/progress.md",
                              "old_str": "step 2 pending", "new_str": "step 2 done"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let out = run(
        &fx,
        json!({"command": "insert", "path": "/memories/notes/progress.md",
                              "insert_line": 0, "insert_text": "Owner: platform team"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let view = run(
        &fx,
        json!({"command": "view", "path": "/memories/notes/progress.md"}),
    )
    .await;
    assert!(view.content.contains("step 2 done") && view.content.contains("Owner: platform team"));
    assert!(view.content.contains("     1\t"), "{}", view.content);
    let ranged = run(
        &fx,
        json!({"command": "view", "path": "/memories/notes/progress.md",
                                 "view_range": [1, 1]}),
    )
    .await;
    assert_eq!(ranged.content.lines().count(), 2, "{}", ranged.content);

    let dir = run(&fx, json!({"command": "view", "path": "/memories"})).await;
    assert!(
        dir.content.contains("/memories/notes/progress.md"),
        "{}",
        dir.content
    );

    let out = run(
        &fx,
        json!({"command": "rename", "old_path": "/memories/notes/progress.md",
                              "new_path": "/memories/migration.md"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    let ix = index(&fx);
    assert!(
        ix.contains("migration.md") && !ix.contains("notes/progress.md"),
        "{ix}"
    );
    assert!(
        fx.store
            .read("migration.md")
            .await
            .unwrap()
            .raw
            .contains("step 2 done")
    );

    let out = run(
        &fx,
        json!({"command": "delete", "path": "/memories/migration.md"}),
    )
    .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(fx.store.scan().await.unwrap().is_empty());
    assert!(!index(&fx).contains("migration.md"));
}

#[cfg(unix)]
#[tokio::test]
async fn escapes_secrets_and_the_index_are_refused() {
    let fx = fx();
    for path in [
        "/memories/../outside.md",
        "/etc/passwd.md",
        "/memories/.hidden.md",
        "memories/x.md",
        "/memoriesx/y.md",
    ] {
        let out = run(
            &fx,
            json!({"command": "create", "path": path, "file_text": "x"}),
        )
        .await;
        assert!(out.is_error, "{path} was accepted");
    }
    let out = run(
        &fx,
        json!({"command": "create", "path": "/memories/MEMORY.md", "file_text": "x"}),
    )
    .await;
    assert!(out.is_error);
    let out = run(
        &fx,
        json!({"command": "create", "path": "/memories/creds.md",
                              "file_text": "aws key AKIAIOSFODNN7EXAMPLE"}),
    )
    .await;
    assert!(
        out.is_error && !out.content.contains("AKIAIOSFODNN7EXAMPLE"),
        "{}",
        out.content
    );
    assert!(!fx.root.join("creds.md").exists());

    // A symlinked directory leading outside the memory dir.
    let outside = fx._tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, fx.root.join("linked")).unwrap();
    let out = run(
        &fx,
        json!({"command": "create", "path": "/memories/linked/evil.md", "file_text": "x"}),
    )
    .await;
    assert!(out.is_error, "{}", out.content);
    assert!(!outside.join("evil.md").exists());
    assert!(
        fx.tool
            .write_targets(
                &json!({"command": "create", "path": "/memories/linked/evil.md", "file_text": "x"}),
                &tool_context()
            )
            .is_err()
    );

    // Malformed input and ambiguous edits are errors, not panics.
    assert!(run(&fx, json!({"command": "explode"})).await.is_error);
    run(&fx, json!({"command": "create", "path": "/memories/a.md", "file_text": "intro\nzebra\nzebra\n"})).await;
    let out = run(&fx, json!({"command": "str_replace", "path": "/memories/a.md", "old_str": "zebra", "new_str": "y"})).await;
    assert!(
        out.is_error && out.content.contains("2 times"),
        "{}",
        out.content
    );
    assert!(
        run(&fx, json!({"command": "delete", "path": "/memories"}))
            .await
            .is_error
    );
}

/// Hostile and ordinary paths, as the part after `/memories/`. The tool's `create` on
/// `/memories/<rel>` and the store's own `write(<rel>)` must give the same answer: both refuse
/// (with the store's error for a `.md` path the grammar refuses), or both write `<rel>`.
const PATH_ROWS: &[&str] = &[
    // ordinary
    "notes/progress.md",
    "日本語/メモ.md",
    "logs/2026/04/2026-04-09.md",
    "team/deploy.md",
    "memory.md",
    " .md",
    // escapes
    "../escape.md",
    "a/../../escape.md",
    "team/../x.md",
    "/etc/passwd.md",
    "//etc/passwd.md",
    "notes.md/",
    "a//b.md",
    "./a.md",
    ".hidden.md",
    "a/.git/x.md",
    "a/ /b.md",
    "",
    ".",
    "..",
    // backslashes, NUL, controls
    "a\\..\\b.md",
    "C:\\x.md",
    "a\\b.md",
    "nul\0.md",
    "tab\there.md",
    "esc\u{1b}[2J.md",
    // the index and non-memory files
    "MEMORY.md",
    "team/MEMORY.md",
    "x.MD",
    "notes.txt",
    // escapes that are not decoded (percent, `\x`), replacement character
    "%2e%2e/escape.md",
    "%2fetc%2fpasswd.md",
    "\\xff.md",
    "\u{FFFD}.md",
    // Unicode lookalikes of `.` and `/`: literal names, never separators
    "\u{FF0E}\u{FF0E}/x.md",
    "\u{2024}\u{2024}/x.md",
    "a\u{2215}..\u{2215}b.md",
    "\u{FF0F}etc\u{FF0F}passwd.md",
    "a/\u{202E}dm.txt.md",
];

#[tokio::test]
async fn the_tool_and_the_store_give_one_answer_for_every_path() {
    let long_segment = format!("{}.md", "x".repeat(201));
    let long_ok = format!("{}.md", "x".repeat(196));
    let long_bytes = format!("{}.md", "決".repeat(100));
    let deep = format!("{}x.md", "d/".repeat(300));
    let rows = PATH_ROWS.iter().copied().chain([
        long_segment.as_str(),
        long_ok.as_str(),
        long_bytes.as_str(),
        deep.as_str(),
    ]);
    for rel in rows {
        let (via_tool, direct) = (fx(), fx());
        let out = run(
            &via_tool,
            json!({"command": "create", "path": format!("/memories/{rel}"),
                   "file_text": "# Hostile path row\nbody\n"}),
        )
        .await;
        let doc = memloop_store::MemoryDoc::parse(
            "---\nname: Hostile path row\ndescription: Hostile path row\n---\n# Hostile path row\nbody\n",
            "x",
        )
        .unwrap();
        let stored = direct
            .store
            .write(rel, &doc, memloop_store::WriteMode::Overwrite)
            .await;
        assert_eq!(
            !out.is_error,
            stored.is_ok(),
            "{rel:?}: tool says {:?}, store says {stored:?}",
            out.content
        );
        match stored {
            Ok(_) => {
                let file = via_tool.store.read(rel).await.unwrap();
                assert!(file.raw.contains("body"), "{rel:?}: {}", file.raw);
                assert_eq!(out.files_written.len(), 1, "{rel:?}");
            }
            Err(e @ memloop_store::MemoryError::InvalidName { .. })
                if rel.ends_with(".md") && rel != "MEMORY.md" =>
            {
                assert!(
                    out.content.contains(&e.to_string()),
                    "{rel:?}: the tool's error {:?} is not the store's {e}",
                    out.content
                );
            }
            Err(_) => {}
        }
        assert!(
            !via_tool.root.parent().unwrap().join("etc").exists()
                && !via_tool.root.parent().unwrap().join("escape.md").exists(),
            "{rel:?} escaped the memory dir"
        );
    }
}
