//! One rule for the text of a title, on every store: a NUL or another control character that is
//! not whitespace (BEL, ESC, DEL, C1) in a title or description is refused with the same clear
//! error by the memory dir and by the PostgreSQL team store (it used to become `a-b.md` on one
//! and a raw database error on the other, and to reach `MEMORY.md` raw), through the tools and
//! through each store's own write; whitespace controls (a tab) are written as a space.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_files::FileMemoryStore;
use memloop_mcp::ProjectStores;
use memloop_pg::{Expected, PgMemoryStore};
use memloop_store::{MemoryDoc, MemoryError, MemoryType, WriteMode};
use serde_json::json;
use std::sync::Arc;
use support::team::TestTeam;
use support::{Fixture, call, connect, s, save};

const HOSTILE: [(&str, &str); 5] = [
    ("nul", "a\u{0}b"),
    ("bel", "deploy\u{7} notes"),
    ("esc", "\u{1b}[2Jrelease"),
    ("del", "rota\u{7f}"),
    ("c1", "csi\u{9b}31m"),
];

/// `s` as the inside of a YAML double-quoted string, control characters as `\xNN` escapes.
fn yaml_escaped(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_control() {
                format!("\\x{:02x}", u32::from(c))
            } else {
                c.to_string()
            }
        })
        .collect()
}

fn assert_refused(e: &MemoryError, what: &str) {
    let MemoryError::InvalidName { name, reason } = e else {
        panic!("{what}: not a name refusal: {e}")
    };
    assert!(reason.contains("control character"), "{what}: {reason}");
    assert!(
        !name.chars().any(char::is_control),
        "{what}: shown raw: {name:?}"
    );
    assert!(!e.to_string().chars().any(char::is_control), "{what}: {e}");
}

/// Each hostile title through `context_save`, then a control character reaching a description
/// through `context_manage update`: refused, nothing written.
async fn through_the_tools(client: &support::Client, project: &std::path::Path) {
    for (what, title) in HOSTILE {
        let r = save(
            client,
            project,
            json!([{"type": "decision", "title": title, "content": "body text"}]),
        )
        .await;
        assert_eq!(r["is_error"], true, "{what}: {r}");
        assert_eq!(r["results"][0]["code"], "invalid_text", "{what}: {r}");
        assert!(
            r["results"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("the title contains the control character U+"),
            "{what}: {r}"
        );
    }
    let saved = save(
        client,
        project,
        json!([{"type": "knowledge", "title": "tab\tin title", "content": "fine"}]),
    )
    .await;
    assert_eq!(saved["written"], 1, "{saved}");
    let rel = saved["results"][0]["path"].as_str().unwrap().to_owned();
    let r = call(
        client,
        "context_manage",
        json!({"project_path": s(project), "action": "update", "target": rel,
               "content": "\u{1b}]0;pwned\u{7} new first line", "expected_version": saved["results"][0]["version"]}),
    )
    .await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(
        r["reason"].as_str().unwrap().contains("control character"),
        "{r}"
    );
    let list = call(
        client,
        "context_manage",
        json!({"project_path": s(project), "action": "list"}),
    )
    .await;
    let listed = list["memories"].as_array().unwrap();
    assert_eq!(listed.len(), 1, "{list}");
    // Whitespace controls are written as one space, on both stores alike.
    assert_eq!(listed[0]["title"], "tab in title", "{list}");
    for m in listed {
        for v in m.as_object().unwrap().values() {
            assert!(!v.as_str().unwrap_or("").contains('\u{1b}'), "{list}");
        }
    }
}

#[tokio::test]
async fn control_characters_in_titles_are_refused_on_the_file_store() {
    let fx = Fixture::new();
    let project = fx.project("rota");
    let client = connect(fx.config()).await;
    through_the_tools(&client, &project).await;
    let mem = memloop_paths::project_dir(&fx.home, &project).join("memory");
    let index = std::fs::read_to_string(mem.join("MEMORY.md")).unwrap();
    assert!(
        !index.chars().any(|c| c.is_control() && c != '\n'),
        "{index:?}"
    );

    // The store's own write applies the same rule.
    let store = FileMemoryStore::open(&mem).unwrap();
    for (what, title) in HOSTILE {
        let doc = MemoryDoc::new(title, "d", MemoryType::Project, "b");
        let e = store
            .write("notes.md", &doc, WriteMode::Overwrite)
            .await
            .unwrap_err();
        assert_refused(&e, what);
        let doc = MemoryDoc::new("t", title, MemoryType::Project, "b");
        let e = store
            .write("notes.md", &doc, WriteMode::Overwrite)
            .await
            .unwrap_err();
        assert_refused(&e, what);
    }
    assert!(!mem.join("notes.md").exists());
}

#[tokio::test]
async fn control_characters_in_titles_are_refused_on_postgres() {
    let fx = Fixture::new();
    let project = fx.project("rota");
    let team = TestTeam::new();
    let mut config = fx.config();
    config.stores = Some(team.clone() as Arc<dyn ProjectStores>);
    let client = connect(config).await;
    through_the_tools(&client, &project).await;

    let store = PgMemoryStore::open(team.config(&project)).await.unwrap();
    for (what, title) in HOSTILE {
        let doc = MemoryDoc::new(title, "d", MemoryType::Project, "b");
        let e = store
            .write_versioned("notes.md", &doc, WriteMode::Overwrite, Expected::Any)
            .await
            .unwrap_err();
        assert_refused(&MemoryError::from(e), what);
        // A file pushed as written (team push): its frontmatter parsed, the same rule.
        let raw = format!(
            "---\nname: \"{}\"\ndescription: d\n---\n\nb\n",
            yaml_escaped(title)
        );
        let e = store
            .write_versioned_raw("notes.md", &raw, Expected::Any)
            .await
            .unwrap_err();
        assert_refused(&MemoryError::from(e), what);
    }
    // NUL in a body: refused by the rule, not by the database.
    let doc = MemoryDoc::new("t", "d", MemoryType::Project, "a\u{0}b");
    let e = MemoryError::from(
        store
            .write_versioned("notes.md", &doc, WriteMode::Overwrite, Expected::Any)
            .await
            .unwrap_err(),
    );
    assert!(e.to_string().contains("NUL"), "{e}");
    assert!(store.get("notes.md").await.unwrap().is_none());
}
