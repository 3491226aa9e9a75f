//! Every way into the file store obeys every write rule, with the same outcome: a write of fields
//! (`write`: the agent's memory tools, the extractor, dream, MCP saves), a write of a file's text
//! as is (`write_raw_if`: team pull, `memloop memory edit`, MCP updates that keep unknown
//! frontmatter), a rename (`FileMemoryStore::rename`: `memloop memory rename`), and the two tool
//! sets a model writes with (memloop's `memory_write`, Anthropic's `memory` command `create`),
//! which turn a model's input into one of those writes. The rules are
//! decided once, by `CheckedWrite`; this table proves no writer skips one (the team server's
//! writers, `context_save`, `context_manage update` and the PostgreSQL store, have the same
//! table in `crates/mcp/tests/write_rules.rs`). Before, a raw write
//! and a rename could put a `user` memory into `team/`, a rename skipped the rules entirely, and
//! the size cap measured the body for one writer and the whole text for another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::tool::{Tool, ToolOutput};
use memloop_files::{FileMemoryStore, StoreConfig};
use memloop_memory::tools::{AnthropicMemoryTool, MemoryWriteTool};
use memloop_store::{
    ExpectedVersion, MemoryDoc, MemoryError, MemoryStore, MemoryType, WriteLimits, WriteMode,
};
use memloop_testkit::WriteOutcome;
use memloop_testkit::tool_context;
use serde_json::json;
use std::sync::Arc;
use tempfile::TempDir;

/// What a tool's answer says of the write (the tools pass the store's error text on).
fn tool_outcome(out: &ToolOutput) -> WriteOutcome {
    if !out.is_error {
        return WriteOutcome::Written;
    }
    if out.content.contains("secret") {
        WriteOutcome::Secret
    } else if out.content.contains("-byte limit") {
        WriteOutcome::TooLarge
    } else {
        WriteOutcome::BadName
    }
}

/// One case: where a memory goes and what it is.
struct Case {
    rule: &'static str,
    to: &'static str,
    doc: MemoryDoc,
    /// Text added to the frontmatter of the raw form (keys memloop does not know).
    extra_frontmatter: &'static str,
    expected: WriteOutcome,
}

const LIMIT: usize = 4096;

fn cases() -> Vec<Case> {
    let plain = |t: MemoryType, body: &str| MemoryDoc::new("Заметка", "描述 line", t, body);
    vec![
        Case {
            rule: "a good memory",
            to: "team/deploy.md",
            doc: plain(MemoryType::Project, "Деплой по вторникам."),
            extra_frontmatter: "",
            expected: WriteOutcome::Written,
        },
        Case {
            rule: "user memories never go under team/",
            to: "team/me.md",
            doc: plain(MemoryType::User, "Я предпочитаю краткие ответы."),
            extra_frontmatter: "",
            expected: WriteOutcome::BadName,
        },
        Case {
            rule: "a secret in the body",
            to: "db.md",
            doc: plain(MemoryType::Project, "пароль: Qw7zLp2Vn9xT"),
            extra_frontmatter: "",
            expected: WriteOutcome::Secret,
        },
        Case {
            rule: "never MEMORY.md",
            to: "MEMORY.md",
            doc: plain(MemoryType::Project, "x"),
            extra_frontmatter: "",
            expected: WriteOutcome::BadName,
        },
        Case {
            rule: "the size cap counts the whole text, frontmatter included",
            to: "big.md",
            doc: MemoryDoc::new(
                "big",
                "я".repeat(LIMIT / 2),
                MemoryType::Project,
                "b".repeat(LIMIT / 2),
            ),
            extra_frontmatter: "",
            expected: WriteOutcome::TooLarge,
        },
    ]
}

fn store(dir: &TempDir) -> FileMemoryStore {
    FileMemoryStore::open(dir.path())
        .unwrap()
        .with_config(StoreConfig {
            write: WriteLimits {
                max_text_bytes: LIMIT,
            },
            ..Default::default()
        })
}

#[tokio::test]
async fn every_writer_gives_the_same_outcome_for_every_rule() {
    let mut rows = 0;
    for case in cases() {
        // A write of fields.
        let dir = TempDir::new().unwrap();
        let s = store(&dir);
        let fields = WriteOutcome::of(&s.write(case.to, &case.doc, WriteMode::Overwrite).await);
        // A write of the file's text as is.
        let dir = TempDir::new().unwrap();
        let s = store(&dir);
        let mut text = case.doc.render();
        if !case.extra_frontmatter.is_empty() {
            text = text.replacen("---\n", &format!("---\n{}", case.extra_frontmatter), 1);
        }
        let raw = WriteOutcome::of(&s.write_raw_if(case.to, &text, &ExpectedVersion::Any).await);
        // A rename from a private path the memory was written to. What cannot be stored
        // anywhere (a secret, too large) is planted as a file, as a hand edit would leave it.
        let dir = TempDir::new().unwrap();
        let s = store(&dir);
        std::fs::write(dir.path().join("source.md"), &text).unwrap();
        let renamed = WriteOutcome::of(&s.rename("source.md", case.to).await);
        // The agent's memory_write tool: the topic and the fields as a model gives them.
        let tool_dir = TempDir::new().unwrap();
        let tool_store: Arc<dyn MemoryStore> = Arc::new(store(&tool_dir));
        let input = json!({
            "topic": case.to.trim_end_matches(".md"),
            "content": case.doc.body,
            "name": case.doc.name,
            "description": case.doc.description,
            "type": case.doc.memory_type.map(|t| t.as_str()),
        });
        let agent_tool = tool_outcome(
            &MemoryWriteTool::new(tool_store)
                .call(input, &tool_context())
                .await,
        );
        // Anthropic's memory tool: `create` with the whole file text.
        let anthropic_dir = TempDir::new().unwrap();
        let anthropic_store: Arc<dyn MemoryStore> = Arc::new(store(&anthropic_dir));
        let input = json!({
            "command": "create",
            "path": format!("/memories/{}", case.to),
            "file_text": text,
        });
        let anthropic = tool_outcome(
            &AnthropicMemoryTool::new(anthropic_store)
                .call(input, &tool_context())
                .await,
        );
        for (writer, got) in [
            ("write", fields),
            ("write_raw_if", raw),
            ("rename", renamed),
            ("memory_write tool", agent_tool),
            ("anthropic memory tool", anthropic),
        ] {
            assert_eq!(
                got, case.expected,
                "{writer}: {} ({} -> {got:?})",
                case.rule, case.to
            );
            rows += 1;
        }
        if case.expected != WriteOutcome::Written {
            assert!(
                !dir.path().join(case.to).exists() || case.to == "MEMORY.md",
                "{}: the refused rename moved the file",
                case.rule
            );
            assert!(dir.path().join("source.md").exists());
        }
    }
    assert_eq!(rows, 25);
}

#[tokio::test]
async fn a_secret_in_an_unknown_frontmatter_key_is_refused_by_raw_writes_and_renames() {
    let dir = TempDir::new().unwrap();
    let s = store(&dir);
    let text =
        "---\nname: n\ndescription: d\nmetadata:\n  api_key: AKIAABCDEFGH12345678\n---\n\nbody\n";
    let raw = s
        .write_raw_if("x.md", text, &ExpectedVersion::Any)
        .await
        .unwrap_err();
    assert!(matches!(raw, MemoryError::SensitiveData { .. }), "{raw:?}");
    std::fs::write(dir.path().join("planted.md"), text).unwrap();
    let renamed = s.rename("planted.md", "team/x.md").await.unwrap_err();
    assert!(
        matches!(renamed, MemoryError::SensitiveData { .. }),
        "{renamed:?}"
    );
}
