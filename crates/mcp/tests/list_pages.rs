//! `context_manage list` answers in pages, by path, with an opaque cursor (`nextCursor`): with
//! thousands of memories (long Chinese, Russian and accented titles) every page is under the
//! answer cap with items in it, paging lists every memory exactly once in order, a prefix pages
//! within the prefix, a write between two pages neither repeats nor hides the others, and a
//! garbage or forged cursor is refused. `context_load` of the same project stays under the cap,
//! uncut.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_files::FileMemoryStore;
use memloop_mcp::McpLimits;
use memloop_store::{CheckedWrite, ExpectedVersion, MemoryDoc, MemoryStore, MemoryType, WriteMode};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use support::{Client, Fixture, call, connect, s};

/// The default answer cap.
const DEFAULT_CAP: usize = 256 * 1024;

/// Memories the big project holds.
const MEMORIES: usize = 2_600;

/// The default memory dir of `project` in the fixture's home.
fn memory_dir(fx: &Fixture, project: &Path) -> PathBuf {
    memloop_paths::project_dir(&fx.home, project).join("memory")
}

/// The path of the `i`th memory: a third are decisions, the rest knowledge.
fn path_of(i: usize) -> String {
    if i.is_multiple_of(3) {
        format!("decisions/d{i:05}.md")
    } else {
        format!("knowledge/k{i:05}.md")
    }
}

/// The project's memory with `n` memories, written straight through its store in batches, each
/// with a long title and description in Chinese, Russian and accented Latin. Returns their
/// paths.
async fn fill(fx: &Fixture, client: &Client, project: &Path, n: usize) -> Vec<String> {
    let init = call(
        client,
        "context_manage",
        json!({"project_path": s(project), "action": "init_project", "claude_md": false}),
    )
    .await;
    assert_eq!(init["is_error"], false, "{init}");
    let store = FileMemoryStore::open(memory_dir(fx, project)).unwrap();
    let store: &dyn MemoryStore = &store;
    let mut paths = Vec::new();
    let limits = McpLimits::default().write_limits();
    for chunk in (0..n).collect::<Vec<_>>().chunks(250) {
        let mut writes = Vec::new();
        for &i in chunk {
            let title = format!(
                "数据库迁移计划 {i} — План миграции базы данных номер {i}, révision café {}",
                "длинный заголовок ".repeat(6)
            );
            let description = format!(
                "Решение {i}: 我们决定把所有服务迁移到 PostgreSQL 16，{}",
                "подробное описание причин и последствий ".repeat(8)
            );
            let doc = MemoryDoc::new(title, description, MemoryType::Project, "Текст 正文 é");
            let write =
                CheckedWrite::check(&path_of(i), &doc, WriteMode::Overwrite, limits).unwrap();
            writes.push((write, ExpectedVersion::Any));
            paths.push(path_of(i));
        }
        store.write_checked_batch(writes).await.unwrap();
    }
    paths.sort();
    paths
}

/// One `list` call (`target`: the prefix).
async fn list(
    client: &Client,
    project: &Path,
    target: Option<&str>,
    cursor: Option<&str>,
) -> Value {
    let mut args = json!({"project_path": s(project), "action": "list"});
    if let Some(t) = target {
        args["target"] = json!(t);
    }
    if let Some(c) = cursor {
        args["cursor"] = json!(c);
    }
    call(client, "context_manage", args).await
}

/// The size of an answer as the server sent it (without the `is_error` the helper adds).
fn answer_bytes(v: &Value) -> usize {
    let mut v = v.clone();
    if let Value::Object(map) = &mut v {
        map.remove("is_error");
    }
    v.to_string().len()
}

/// Every page of a list, checked on the way: under the cap, uncut, with items, each memory
/// once (no second listing of them beside the items), and a cursor on every page but the last.
async fn all_pages(
    client: &Client,
    project: &Path,
    target: Option<&str>,
    cap: usize,
) -> Vec<Vec<String>> {
    let mut pages = Vec::new();
    let mut cursor: Option<String> = None;
    loop {
        let page = list(client, project, target, cursor.as_deref()).await;
        assert_eq!(page["is_error"], false, "{page}");
        assert!(page.get("cut").is_none(), "a page was cut: {}", page["cut"]);
        assert!(answer_bytes(&page) <= cap, "{} bytes", answer_bytes(&page));
        let items: Vec<String> = page["memories"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["path"].as_str().unwrap().to_owned())
            .collect();
        assert!(!items.is_empty(), "an empty page: {page}");
        assert!(
            page.get("manifest").is_none(),
            "the page lists its memories twice"
        );
        for m in page["memories"].as_array().unwrap() {
            assert!(m["title"].as_str().unwrap().chars().count() <= 121, "{m}");
            assert!(
                m["description"].as_str().unwrap().chars().count() <= 241,
                "{m}"
            );
        }
        pages.push(items);
        match page.get("nextCursor").and_then(Value::as_str) {
            Some(next) => cursor = Some(next.to_owned()),
            None => break,
        }
        assert!(pages.len() <= MEMORIES, "the cursor does not move on");
    }
    pages
}

#[tokio::test]
async fn a_list_of_thousands_pages_every_memory_once_in_path_order_under_the_cap() {
    let fx = Fixture::new();
    let project = fx.project("большой-проект");
    let client = connect(fx.config()).await;
    let paths = fill(&fx, &client, &project, MEMORIES).await;

    let pages = all_pages(&client, &project, None, DEFAULT_CAP).await;
    assert!(pages.len() > 10, "{} pages", pages.len());
    let listed: Vec<String> = pages.concat();
    assert_eq!(listed, paths, "every memory once, by path");

    // Within a prefix: its memories alone, in pages of their own.
    let decisions = all_pages(&client, &project, Some("decisions/"), DEFAULT_CAP).await;
    let want: Vec<String> = paths
        .iter()
        .filter(|p| p.starts_with("decisions/"))
        .cloned()
        .collect();
    assert_eq!(decisions.concat(), want);
    let first = list(&client, &project, Some("decisions/"), None).await;
    assert_eq!(first["total"], json!(want.len()));

    // `context_load` at this size: within the cap, nothing cut, the counts whole.
    let load = call(
        &client,
        "context_load",
        json!({"project_path": s(&project), "detail": "full"}),
    )
    .await;
    assert_eq!(load["is_error"], false);
    assert!(load.get("cut").is_none(), "{}", load["cut"]);
    assert!(answer_bytes(&load) <= McpLimits::default().max_answer_bytes);
    assert_eq!(load["memories"], json!(MEMORIES));
    assert_eq!(load["counts"]["decisions"], json!(want.len()));
    assert!(!load["active_decisions"].as_array().unwrap().is_empty());
    // Its lists show titles and descriptions cut as a list item's are.
    for d in load["decisions"].as_array().unwrap() {
        assert!(d["title"].as_str().unwrap().chars().count() <= 121, "{d}");
        assert!(
            d["description"].as_str().unwrap().chars().count() <= 241,
            "{d}"
        );
    }
    // The index's lines and the cap's warning apart: the warning names the index's size, the
    // lines stay the same string as the project grows.
    let lines = load["index"]["content"].as_str().unwrap().to_owned();
    assert!(!lines.is_empty() && !lines.contains("WARNING"), "{lines}");
    assert_eq!(load["index"]["truncated"], true);
    let warning = load["index"]["warning"].as_str().unwrap();
    assert!(warning.starts_with("> WARNING: MEMORY.md is "), "{warning}");
    let saved = call(
        &client,
        "context_save",
        json!({"project_path": s(&project), "entries": [
            {"type": "knowledge", "title": "One more", "content": "Added last."}]}),
    )
    .await;
    assert_eq!(saved["is_error"], false, "{saved}");
    let again = call(
        &client,
        "context_load",
        json!({"project_path": s(&project)}),
    )
    .await;
    assert_eq!(again["index"]["content"], json!(lines));
    assert_eq!(again["index"]["warning"], json!(warning));
}

#[tokio::test]
async fn with_a_small_answer_cap_pages_are_smaller_and_still_list_every_memory_once() {
    let fx = Fixture::new();
    let project = fx.project("小-малый");
    let cap = 24 * 1024;
    let mut config = fx.config();
    config.limits.max_answer_bytes = cap;
    let client = connect(config).await;
    let paths = fill(&fx, &client, &project, 400).await;
    let pages = all_pages(&client, &project, None, cap).await;
    assert!(
        pages.iter().all(|p| p.len() < 100),
        "{:?}",
        pages.iter().map(Vec::len).collect::<Vec<_>>()
    );
    assert_eq!(pages.concat(), paths);
}

#[tokio::test]
async fn a_write_between_pages_neither_repeats_nor_hides_the_others() {
    let fx = Fixture::new();
    let project = fx.project("projet-café");
    let client = connect(fx.config()).await;
    let paths = fill(&fx, &client, &project, 700).await;

    let first = list(&client, &project, None, None).await;
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    let mut seen: Vec<String> = first["memories"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["path"].as_str().unwrap().to_owned())
        .collect();
    let last = seen.last().unwrap().clone();

    // Between the pages: a memory listed already is updated (it becomes the newest), one not
    // listed yet is deleted, and new memories land before and after the cursor.
    let store = FileMemoryStore::open(memory_dir(&fx, &project)).unwrap();
    let store: &dyn MemoryStore = &store;
    let doc = |t: &str| MemoryDoc::new(t, t, MemoryType::Project, "новый текст");
    store
        .write(&seen[0], &doc("Обновлено"), WriteMode::Overwrite)
        .await
        .unwrap();
    let deleted = paths.iter().rfind(|p| **p > last).unwrap().clone();
    store.delete(&deleted).await.unwrap();
    let (before, after) = ("decisions/a-новое.md", "knowledge/zz-新的.md");
    for p in [before, after] {
        store
            .write(p, &doc("新的"), WriteMode::Overwrite)
            .await
            .unwrap();
    }

    let mut cursor = Some(cursor);
    while let Some(c) = cursor {
        let page = list(&client, &project, None, Some(&c)).await;
        assert_eq!(page["is_error"], false, "{page}");
        seen.extend(
            page["memories"]
                .as_array()
                .unwrap()
                .iter()
                .map(|m| m["path"].as_str().unwrap().to_owned()),
        );
        cursor = page["nextCursor"].as_str().map(str::to_owned);
    }
    let unique: BTreeSet<&String> = seen.iter().collect();
    assert_eq!(unique.len(), seen.len(), "a memory was listed twice");
    let mut want: Vec<String> = paths.iter().filter(|p| **p != deleted).cloned().collect();
    want.push(after.to_owned());
    want.sort();
    assert_eq!(
        seen, want,
        "the memories after the cursor, each once, the new one included"
    );
}

#[tokio::test]
async fn a_garbage_forged_or_foreign_cursor_is_refused() {
    let fx = Fixture::new();
    let project = fx.project("alpha-проект");
    let other = fx.project("beta-другой");
    let client = connect(fx.config()).await;
    fill(&fx, &client, &project, 450).await;
    fill(&fx, &client, &other, 450).await;
    let first = list(&client, &project, None, None).await;
    let cursor = first["nextCursor"].as_str().unwrap().to_owned();
    assert_eq!(
        list(&client, &project, None, Some(&cursor)).await["is_error"],
        false
    );

    // The cursor's path changed by hand (a later path, its checksum kept).
    let mut parts: Vec<String> = cursor.split('.').map(str::to_owned).collect();
    parts[1] = "knowledge/k00449.md"
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    let forged = parts.join(".");
    for bad in [
        forged.as_str(),
        "not a cursor",
        "ml1.zz.00",
        "游标",
        &cursor[..cursor.len() - 1],
    ] {
        let r = list(&client, &project, None, Some(bad)).await;
        assert_eq!(r["is_error"], true, "{bad}: {r}");
        assert_eq!(r["code"], "invalid_cursor", "{r}");
        assert!(r["reason"].as_str().unwrap().contains("nextCursor"), "{r}");
    }
    // Another project's cursor, or this one with another prefix.
    let theirs = list(&client, &other, None, None).await["nextCursor"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(
        list(&client, &project, None, Some(&theirs)).await["code"],
        "invalid_cursor"
    );
    assert_eq!(
        list(&client, &project, Some("knowledge/"), Some(&cursor)).await["code"],
        "invalid_cursor"
    );
}
