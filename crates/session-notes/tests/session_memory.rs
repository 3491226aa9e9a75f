//! Session memory: the notes file, thresholds, the edit tool's fixed lines, customisation.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

mod common;

use common::{WORKLOG_LINE, append_worklog, ctx_with, memory};
use memloop_core::Hook;
use memloop_core::{
    events::AgentEvent,
    message::{ContentBlock, Message, MessageKind, Role},
    model::Model,
};
use memloop_session_notes::NotesEvent;
use memloop_session_notes::{
    DEFAULT_TEMPLATE, EDIT_TOOL_NAME, FileSessionNotes, SessionMemory, SessionNotesConfig,
    SessionNotesHook, UpdateTrigger, frame,
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use serde_json::json;
use std::sync::Arc;
use tempfile::TempDir;

#[tokio::test]
async fn notes_file_is_created_private_from_the_template_and_never_overwritten() {
    let dir = TempDir::new().unwrap();
    let sm = memory(&dir);
    assert_eq!(sm.current_notes().await.unwrap(), None);
    assert!(sm.notes_for_compaction().await.unwrap().is_none());
    assert!(sm.ensure_notes_file().await.unwrap());
    let path = sm.notes_path();
    assert_eq!(
        path,
        dir.path()
            .join("projects/slug/s1/session-memory/summary.md")
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), DEFAULT_TEMPLATE);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &std::path::Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&path), 0o600);
        assert_eq!(mode(path.parent().unwrap()), 0o700);
    }
    let notes = sm.notes_for_compaction().await.unwrap().unwrap();
    assert!(notes.is_template);
    std::fs::write(&path, "# Session Title\n_x_\nmine\n").unwrap();
    assert!(!sm.ensure_notes_file().await.unwrap());
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "# Session Title\n_x_\nmine\n"
    );
    assert!(
        !sm.notes_for_compaction()
            .await
            .unwrap()
            .unwrap()
            .is_template
    );
    // No temp files left behind.
    let entries = std::fs::read_dir(path.parent().unwrap()).unwrap().count();
    assert_eq!(entries, 1);
}

#[tokio::test]
async fn invalid_session_ids_are_rejected() {
    let dir = TempDir::new().unwrap();
    for bad in ["", ".", "..", "../x", "a/b", "a\0b", "/abs"] {
        assert!(
            FileSessionNotes::new(SessionNotesConfig::new(dir.path()), bad).is_err(),
            "{bad:?}"
        );
    }
}

fn tool_round(i: usize) -> [Message; 2] {
    let id = format!("t{i}");
    [
        Message::new(
            Role::Assistant,
            vec![ContentBlock::tool_use(&id, "read", json!({}))],
        ),
        Message::new(
            Role::User,
            vec![ContentBlock::tool_result(&id, "ok", false)],
        ),
    ]
}

#[tokio::test]
async fn thresholds_decide_updates_and_reset_after_compaction() {
    let dir = TempDir::new().unwrap();
    let sm = memory(&dir);
    let model: Arc<dyn Model> = Arc::new(ScriptedModel::new());
    let mut conv = vec![Message::user("start")];
    conv.extend(tool_round(0));
    // Below 10K: never.
    let (ctx, _) = ctx_with(model.clone(), conv.clone(), 9_999);
    assert!(!sm.should_update(&ctx));
    // At 10K: the first update, whatever the tool calls.
    let (ctx, _) = ctx_with(model.clone(), conv.clone(), 10_000);
    assert!(sm.should_update(&ctx));
    drop(sm.update(&ctx, UpdateTrigger::Auto)); // take the baselines, give the place up
    // +5K but only 2 tool calls since and the last response used tools: not yet.
    conv.extend(tool_round(1));
    conv.extend(tool_round(2));
    let (ctx, _) = ctx_with(model.clone(), conv.clone(), 15_000);
    assert!(!sm.should_update(&ctx));
    // A third tool call: due.
    conv.extend(tool_round(3));
    let (ctx, _) = ctx_with(model.clone(), conv.clone(), 15_000);
    assert!(sm.should_update(&ctx));
    // 3 tool calls but only +4,999 tokens: not due.
    let (ctx, _) = ctx_with(model.clone(), conv.clone(), 14_999);
    assert!(!sm.should_update(&ctx));
    // A last turn without tools also qualifies.
    let mut plain = conv.clone();
    plain.truncate(3);
    plain.push(Message::user("thanks"));
    plain.push(Message::assistant("welcome"));
    let (ctx, _) = ctx_with(model.clone(), plain, 15_000);
    assert!(sm.should_update(&ctx));

    // Baselines reset on compaction: after compaction to 3K tokens, growth is measured from 3K,
    // not from 10K.
    let summary = Message::user("notes").with_kind(MessageKind::CompactSummary);
    let compacted = vec![
        Message::user("b").with_kind(MessageKind::CompactBoundary),
        summary.clone(),
        Message::user("next"),
        Message::assistant("ok"),
    ];
    let hook = SessionNotesHook::new(Arc::new(sm.clone()));
    let (ctx, _) = ctx_with(model.clone(), compacted.clone(), 3_000);
    hook.on_compacted(&ctx).await;
    let b = sm.baselines();
    assert_eq!(b.tokens_at_last_update, 3_000);
    assert_eq!(b.last_summarized, Some(summary.id.clone()));
    let (ctx, _) = ctx_with(model.clone(), compacted.clone(), 7_999);
    assert!(!sm.should_update(&ctx));
    let (ctx, _) = ctx_with(model, compacted, 8_000);
    assert!(sm.should_update(&ctx));
}

#[tokio::test]
async fn the_updater_edits_only_below_fixed_lines_and_only_that_file() {
    let dir = TempDir::new().unwrap();
    let sm = memory(&dir);
    let outside = dir.path().join("other.md");
    let outside_s = outside.display().to_string();
    let step = std::sync::atomic::AtomicUsize::new(0);
    let model = ScriptedModel::new().on_purpose("session_memory", move |_req| {
        let n = step.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Some(match n {
            // Rename a header: refused by the tool.
            0 => ScriptStep::tool(EDIT_TOOL_NAME, json!({"old_string": "# Worklog", "new_string": "# Log"})),
            // Rewrite an instruction line: refused.
            1 => ScriptStep::tool(EDIT_TOOL_NAME, json!({"old_string": WORKLOG_LINE, "new_string": "_whatever_"})),
            // Add a new header: refused.
            2 => ScriptStep::tool(EDIT_TOOL_NAME, json!({"old_string": WORKLOG_LINE, "new_string": format!("{WORKLOG_LINE}\n# Extra")})),
            // Another file: denied by the gate.
            3 => ScriptStep::tool(EDIT_TOOL_NAME, json!({"old_string": "a", "new_string": "b", "file_path": outside_s})),
            // A good edit.
            4 => append_worklog("read the config"),
            _ => ScriptStep::text("done"),
        })
    });
    let (ctx, sink) = ctx_with(Arc::new(model.clone()), vec![Message::user("hi")], 12_000);
    let report = sm.manual_update(&ctx).await.unwrap();
    assert_eq!(report.refused, 1);
    let notes = sm.current_notes().await.unwrap().unwrap();
    assert_eq!(frame(&notes), frame(DEFAULT_TEMPLATE));
    assert!(notes.contains(&format!("{WORKLOG_LINE}\n- read the config")));
    assert!(!outside.exists());
    // The refusals were readable tool errors for the model.
    let results: Vec<String> = model
        .requests_for("session_memory")
        .iter()
        .filter_map(|r| r.messages.last().cloned())
        .flat_map(|m| m.content)
        .filter_map(|b| match b {
            ContentBlock::ToolResult {
                content,
                is_error: true,
                ..
            } => Some(content.text()),
            _ => None,
        })
        .collect();
    assert_eq!(results.len(), 4, "{results:?}");
    assert!(results[0].contains("section header"));
    assert!(results[3].contains("Permission denied"));
    assert!(
        sink.events()
            .iter()
            .any(|e| matches!(e, AgentEvent::ToolDenied { .. }))
    );
    assert!(
        sink.events()
            .iter()
            .any(|e| matches!(e.extension(), Some(NotesEvent::NotesUpdated { .. })))
    );
    let b = sm.baselines();
    assert_eq!(b.last_summarized, Some(ctx.messages[0].id.clone()));
}

#[tokio::test]
async fn custom_template_and_prompt_replace_the_defaults_with_single_pass_substitution() {
    let dir = TempDir::new().unwrap();
    let cfg_dir = dir.path().join("home/session-memory/config");
    std::fs::create_dir_all(&cfg_dir).unwrap();
    std::fs::write(cfg_dir.join("template.md"), "# Only\n_one section_\n").unwrap();
    std::fs::write(
        cfg_dir.join("prompt.md"),
        "Notes at {{notesPath}}:\n{{currentNotes}}\nkeep {{unknown}}",
    )
    .unwrap();
    let cfg = SessionNotesConfig::new(dir.path().join("home/projects/p"))
        .with_config_home(dir.path().join("home"));
    let sm = FileSessionNotes::new(cfg, "s2").unwrap();
    sm.ensure_notes_file().await.unwrap();
    assert_eq!(
        sm.current_notes().await.unwrap().unwrap(),
        "# Only\n_one section_\n"
    );
    assert!(
        sm.notes_for_compaction()
            .await
            .unwrap()
            .unwrap()
            .is_template
    );
    let prompt = sm
        .update_prompt("body mentions {{notesPath}} literally")
        .await;
    assert_eq!(
        prompt,
        format!(
            "Notes at {}:\nbody mentions {{{{notesPath}}}} literally\nkeep {{{{unknown}}}}",
            sm.notes_path().display()
        )
    );
}

#[tokio::test]
async fn oversized_notes_get_the_condense_reminder_largest_first() {
    let dir = TempDir::new().unwrap();
    let sm = memory(&dir);
    let small = sm.update_prompt(DEFAULT_TEMPLATE).await;
    assert!(!small.contains("too long"));
    let notes = DEFAULT_TEMPLATE
        .replace(WORKLOG_LINE, &format!("{WORKLOG_LINE}\n{}", "w".repeat(12_000)))
        .replace(
            "_What is being worked on right now, what was just finished, and the immediate next step._",
            &format!("_What is being worked on right now, what was just finished, and the immediate next step._\n{}", "c".repeat(9_000)),
        );
    let prompt = sm.update_prompt(&notes).await;
    let w = prompt.find("- # Worklog").unwrap();
    let c = prompt.find("- # Current State").unwrap();
    assert!(w < c, "largest first");
    assert!(prompt.contains("too long"));
    // Whole file over 12K tokens with no single section over 2K: still reminded.
    let spread: String = DEFAULT_TEMPLATE
        .lines()
        .map(|l| {
            if l.starts_with('_') {
                format!("{l}\n{}\n", "s".repeat(5_000))
            } else {
                format!("{l}\n")
            }
        })
        .collect();
    let prompt = sm.update_prompt(&spread).await;
    assert!(prompt.contains("the file as a whole is too long"));
}

/// A `# ` line inside a fenced code block is code, not a section header: the notes updater may
/// add and change such blocks, and sections do not split at them.
#[test]
fn comment_lines_in_code_blocks_are_not_section_headers() {
    use memloop_session_notes::{apply_notes_edit, sections};
    let notes = "# Worklog\n_One line per step._\n\n# Files\n_Paths touched._\n";
    let with_code = apply_notes_edit(
        notes,
        "_One line per step._\n\n",
        "_One line per step._\n```sh\n# build first\ncargo build\n```\n~~~\n# also\n~~~\n",
    )
    .unwrap();
    let again = apply_notes_edit(&with_code, "# build first", "# then test").unwrap();
    assert!(again.contains("# then test"));
    let headers: Vec<&str> = sections(&again).iter().map(|s| s.header).collect();
    assert_eq!(headers, ["# Worklog", "# Files"]);
    // Real headers stay fixed.
    assert!(apply_notes_edit(&again, "# Files", "# Paths").is_err());
}
