//! `context_manage update` replaces a memory's body and keeps the rest of its file: frontmatter
//! keys memloop does not know (`tags:`, a `metadata:` block) stay, on the memory dir (comments
//! too, byte for byte) and on the PostgreSQL team store, so an update never drops what a
//! teammate's tool wrote, and `team pull` carries it on.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::ProjectStores;
use memloop_pg::{Expected, PgMemoryStore};
use memloop_store::MemoryStore;
use serde_json::json;
use std::sync::Arc;
use support::team::TestTeam;
use support::{Fixture, call, connect, s};

const FILE: &str = "---\n\
name: Release train\n\
description: when we release\n\
type: project\n\
# reviewed by the release team\n\
tags: [release, 发布]\n\
metadata:\n  owner: ann\n  ticket: REL-42\n\
---\n\
\n\
Releases leave on Tuesdays.\n";

const NEW_BODY: &str = "Releases leave on Thursdays since June.";

/// [`FILE`] after the update: only the body and the description following it changed.
fn file_updated() -> String {
    FILE.replace(
        "description: when we release",
        &format!("description: {NEW_BODY}"),
    )
    .replace("Releases leave on Tuesdays.", NEW_BODY)
}

/// Update `rel` in `project` through the tool, from the version read by `context_search`.
async fn update(client: &support::Client, project: &std::path::Path, rel: &str) {
    let found = call(
        client,
        "context_search",
        json!({"project_path": s(project), "query": "release tuesdays", "detail": "full"}),
    )
    .await;
    let hit = found["results"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["path"] == rel)
        .unwrap_or_else(|| panic!("{rel} not found: {found}"));
    let r = call(
        client,
        "context_manage",
        json!({"project_path": s(project), "action": "update", "target": rel,
               "content": NEW_BODY, "expected_version": hit["version"]}),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(r["description"], NEW_BODY, "{r}");
}

fn assert_kept(text: &str) {
    // The keys and values (the team store keeps them in one YAML form).
    for kept in [
        "tags:",
        "发布",
        "metadata:",
        "owner: ann",
        "ticket: REL-42",
        "name: Release train",
    ] {
        assert!(text.contains(kept), "`{kept}` was dropped:\n{text}");
    }
    assert!(text.contains(NEW_BODY), "{text}");
    assert!(!text.contains("Tuesdays"), "{text}");
    assert!(text.contains(&format!("description: {NEW_BODY}")), "{text}");
}

#[tokio::test]
async fn update_keeps_unknown_frontmatter_on_the_file_store() {
    let fx = Fixture::new();
    let project = fx.project("trains");
    let mem = memloop_paths::project_dir(&fx.home, &project).join("memory");
    std::fs::create_dir_all(mem.join("knowledge")).unwrap();
    std::fs::write(mem.join("knowledge/release-train.md"), FILE).unwrap();
    let client = connect(fx.config()).await;
    update(&client, &project, "knowledge/release-train.md").await;
    let text = std::fs::read_to_string(mem.join("knowledge/release-train.md")).unwrap();
    assert_kept(&text);
    assert_eq!(text, file_updated());
    // The file store keeps the file's own lines: the comment too, in place.
    assert!(
        text.starts_with(
            "---\nname: Release train\ndescription: Releases leave on Thursdays since June.\n\
             type: project\n# reviewed by the release team\ntags: [release, 发布]\n"
        ),
        "{text}"
    );
}

#[tokio::test]
async fn update_keeps_unknown_frontmatter_on_postgres() {
    let fx = Fixture::new();
    let project = fx.project("trains");
    let team = TestTeam::new();
    let store = PgMemoryStore::open(team.config(&project)).await.unwrap();
    store
        .write_versioned_raw("knowledge/release-train.md", FILE, Expected::Absent)
        .await
        .unwrap();
    let mut config = fx.config();
    config.stores = Some(team.clone() as Arc<dyn ProjectStores>);
    let client = connect(config).await;
    update(&client, &project, "knowledge/release-train.md").await;
    let row = store
        .get("knowledge/release-train.md")
        .await
        .unwrap()
        .unwrap();
    // What a `team pull` writes, and what reads return.
    assert_kept(&row.source);
    assert_kept(&row.content);
    // The writer's own lines stay in the source, as the file store keeps them: the comment,
    // the flow list and the key order.
    assert_eq!(row.source, file_updated(), "{}", row.source);
    let read = (&store as &dyn MemoryStore)
        .read("knowledge/release-train.md")
        .await
        .unwrap();
    assert!(read.raw.contains("owner: ann"), "{}", read.raw);
}
