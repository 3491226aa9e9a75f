//! Each repair pass alone, then all together.
#![allow(clippy::unwrap_used)] // helpers outside #[test] fns unwrap too

use memloop_compact::repair::{
    Issue, add_missing_tool_results, drop_empty_messages, drop_orphan_tool_results,
    ensure_user_first, merge_consecutive_assistant, repair, repair_fn,
};
use memloop_core::{
    invariants::{Violation, check_invariants},
    message::{ContentBlock, Message, MessageKind, Role},
};
use serde_json::json;

fn call(id: &str) -> ContentBlock {
    ContentBlock::tool_use(id, "read", json!({}))
}
fn result(id: &str) -> ContentBlock {
    ContentBlock::tool_result(id, "ok", false)
}
fn asst(blocks: Vec<ContentBlock>, rid: &str) -> Message {
    Message::new(Role::Assistant, blocks).with_response_id(rid)
}
fn user(blocks: Vec<ContentBlock>) -> Message {
    Message::new(Role::User, blocks)
}

#[test]
fn drops_empty_messages_and_blank_text_but_keeps_boundaries() {
    let conv = vec![
        Message::user("").with_kind(MessageKind::CompactBoundary),
        Message::user("hi"),
        asst(
            vec![ContentBlock::text("  "), ContentBlock::text("ok")],
            "r1",
        ),
        Message::user("   "),
    ];
    let empty_id = conv[3].id.to_string();
    let (out, issues) = drop_empty_messages(conv);
    assert_eq!(out.len(), 3);
    assert_eq!(out[2].content.len(), 1);
    assert_eq!(issues, vec![Issue::DroppedEmptyMessage { id: empty_id }]);
}

#[test]
fn drops_orphan_and_duplicate_tool_results() {
    let conv = vec![
        user(vec![result("early"), ContentBlock::text("go")]),
        asst(vec![call("a")], "r1"),
        user(vec![result("a"), result("zz")]),
        user(vec![result("a")]),
    ];
    let (out, issues) = drop_orphan_tool_results(conv);
    assert_eq!(
        issues,
        vec![
            Issue::DroppedOrphanToolResult { id: "early".into() },
            Issue::DroppedOrphanToolResult { id: "zz".into() },
            Issue::DroppedDuplicateToolResult { id: "a".into() },
        ]
    );
    assert_eq!(out[2].tool_result_ids().collect::<Vec<_>>(), ["a"]);
    assert!(out[3].content.is_empty());
}

#[test]
fn answers_unanswered_tool_uses() {
    let conv = vec![
        Message::user("go"),
        asst(
            vec![ContentBlock::Thinking {
                thinking: "hm".into(),
                signature: None,
            }],
            "r1",
        ),
        asst(vec![call("a"), call("b")], "r1"),
        user(vec![result("a"), ContentBlock::text("and also")]),
        asst(vec![call("c")], "r2"),
    ];
    let (out, issues) = add_missing_tool_results(conv);
    assert_eq!(
        issues,
        vec![
            Issue::AddedMissingToolResult { id: "b".into() },
            Issue::AddedMissingToolResult { id: "c".into() }
        ]
    );
    assert_eq!(out.len(), 6);
    assert!(
        check_invariants(&out).is_ok(),
        "{:?}",
        check_invariants(&out)
    );
    assert!(matches!(
        &out[3].content[0],
        ContentBlock::ToolResult { is_error: true, .. }
    ));
}

#[test]
fn merges_consecutive_assistant_responses() {
    let conv = vec![
        Message::user("go"),
        asst(vec![ContentBlock::text("one")], "r1"),
        asst(vec![ContentBlock::text("split")], "r1"),
        asst(vec![ContentBlock::text("two")], "r2"),
    ];
    let before = check_invariants(&conv).unwrap_err();
    assert!(
        before
            .0
            .contains(&Violation::ConsecutiveAssistant { index: 1 })
    );
    let merged_id = conv[3].id.to_string();
    let (out, issues) = merge_consecutive_assistant(conv);
    assert_eq!(
        issues,
        vec![Issue::MergedConsecutiveAssistant { id: merged_id }]
    );
    assert_eq!(out.len(), 3, "split records of one response stay separate");
    assert!(check_invariants(&out).is_ok());
}

#[test]
fn inserts_a_user_message_before_a_leading_assistant() {
    let conv = vec![
        Message::user("b").with_kind(MessageKind::CompactBoundary),
        Message::assistant("hi"),
    ];
    let (out, issues) = ensure_user_first(conv);
    assert_eq!(issues, vec![Issue::InsertedLeadingUser]);
    assert_eq!(out[1].role, Role::User);
    assert!(check_invariants(&out).is_ok());
    let (_, none) = ensure_user_first(vec![Message::user("x")]);
    assert!(none.is_empty());
}

#[test]
fn all_passes_fix_a_badly_broken_conversation_and_plug_into_the_agent() {
    let conv = vec![
        asst(vec![call("a")], "r0"),
        user(vec![result("x")]),
        Message::user(""),
        asst(vec![call("b")], "r1"),
        asst(vec![ContentBlock::text("and")], "r2"),
        user(vec![result("b"), result("b")]),
    ];
    assert!(check_invariants(&conv).is_err());
    let (fixed, issues) = repair(conv.clone());
    assert!(
        check_invariants(&fixed).is_ok(),
        "{:?}",
        check_invariants(&fixed)
    );
    assert!(!issues.is_empty());
    let f = repair_fn();
    assert_eq!(f(conv).len(), fixed.len());
}
