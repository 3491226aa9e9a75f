//! The server against what a hostile project or a careless client sends: project settings that
//! try to move the memory, oversized entries and answers, targets that escape, reads that must
//! not write, stale descriptions, credentials already on disk. Real files, the real protocol.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Some tests need Unix (symlinks, socket pairs) and are compiled out elsewhere, with their helpers.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

mod support;

use memloop_mcp::{INDEX_MIME, McpLimits, RESOURCE_PREFIX, project_id};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use support::{Fixture, call, connect, read_resource, s, save};

/// The default memory dir of `project` in the fixture's home.
fn memory_dir(fx: &Fixture, project: &Path) -> PathBuf {
    memloop_paths::project_dir(&fx.home, project).join("memory")
}

/// A hand-written memory file (no index line), as a user or Claude Code would leave it.
fn hand_write(dir: &Path, rel: &str, name: &str, body: &str) {
    let path = dir.join(rel);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(
        &path,
        format!("---\nname: {name}\ndescription: {name}\ntype: project\n---\n{body}\n"),
    )
    .unwrap();
}

fn local_settings(project: &Path, memory_dir: &str) {
    let d = project.join(".memloop");
    std::fs::create_dir_all(&d).unwrap();
    std::fs::write(
        d.join("settings.local.json"),
        json!({ "memory_dir": memory_dir }).to_string(),
    )
    .unwrap();
}

#[cfg(unix)]
#[tokio::test]
async fn project_settings_cannot_move_memory_outside_the_project() {
    let fx = Fixture::new();
    let ssh = fx.user_home.join(".ssh");
    std::fs::create_dir_all(&ssh).unwrap();
    let client = connect(fx.config()).await;
    let entry = json!([{ "type": "knowledge", "title": "k", "content": "a fact" }]);

    // `~/.ssh` named by the project's own local settings.
    let tilde = fx.project("tilde");
    local_settings(&tilde, "~/.ssh");
    // An absolute path out of the project.
    let abs = fx.project("abs");
    local_settings(&abs, &s(&ssh));
    // A dir inside the project that is a symlink to `~/.ssh`.
    let linked = fx.project("linked");
    std::os::unix::fs::symlink(&ssh, linked.join("mem")).unwrap();
    local_settings(&linked, &s(&linked.join("mem")));
    for project in [&tilde, &abs, &linked] {
        let r = save(&client, project, entry.clone()).await;
        assert_eq!(r["is_error"], true, "{project:?}: {r}");
        let reason = r["reason"].as_str().unwrap();
        assert!(reason.contains("outside the project"), "{reason}");
        assert!(!reason.contains(&s(&ssh)), "names the dir: {reason}");
        assert!(reason.contains("allowed_memory_dirs"), "{reason}");
        let load = call(
            &client,
            "context_load",
            json!({ "project_path": s(project) }),
        )
        .await;
        assert_eq!(load["is_error"], true, "{load}");
    }
    assert!(
        Fixture::files_under(&ssh).is_empty(),
        "{:?}",
        Fixture::files_under(&ssh)
    );

    // Inside the project it is the project's business.
    let inside = fx.project("inside");
    local_settings(&inside, &s(&inside.join(".mem")));
    let r = save(&client, &inside, entry.clone()).await;
    assert_eq!(r["written"], 1, "{r}");
    assert!(inside.join(".mem/knowledge/k.md").is_file());

    // The user's own settings may allow a dir outside.
    let notes = fx.user_home.join("notes");
    std::fs::write(
        fx.home.join("settings.json"),
        json!({ "allowed_memory_dirs": ["~/notes"] }).to_string(),
    )
    .unwrap();
    let allowed = fx.project("allowed");
    local_settings(&allowed, "~/notes/allowed");
    let r = save(&client, &allowed, entry).await;
    assert_eq!(r["written"], 1, "{r}");
    assert!(notes.join("allowed/knowledge/k.md").is_file());
    assert!(Fixture::files_under(&ssh).is_empty());
}

#[tokio::test]
async fn entries_batches_and_answers_are_capped_with_a_note() {
    let fx = Fixture::new();
    let limits = McpLimits {
        max_entry_bytes: 10_000,
        max_batch_entries: 5,
        max_batch_bytes: 30_000,
        max_answer_bytes: 16_000,
    };
    let mut config = fx.config();
    config.limits = limits;
    let client = connect(config).await;
    let project = fx.project("app");

    // One oversized entry refuses the batch: nothing of it is saved.
    let big = "x".repeat(10_001);
    let r = save(
        &client,
        &project,
        json!([
            { "type": "knowledge", "title": "big", "content": big },
            { "type": "knowledge", "title": "small", "content": "fits" },
        ]),
    )
    .await;
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(r["code"], "batch_refused", "{r}");
    assert_eq!(r["results"][0]["status"], "refused");
    assert_eq!(r["results"][0]["code"], "too_large");
    assert_eq!(r["results"][1]["status"], "not_written");
    let mem = memory_dir(&fx, &project);
    assert!(!mem.join("knowledge/big.md").exists());
    assert!(!mem.join("knowledge/small.md").exists());

    // Too many bytes or entries in one batch: the call is refused whole.
    let many: Vec<Value> = (0..4)
        .map(|i| json!({ "type": "knowledge", "title": format!("t{i}"), "content": "y".repeat(9_000) }))
        .collect();
    let r = save(&client, &project, json!(many)).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert!(r["reason"].as_str().unwrap().contains("bytes"));
    let six: Vec<Value> = (0..6)
        .map(|i| json!({ "type": "todo", "title": format!("t{i}"), "content": "z" }))
        .collect();
    assert_eq!(save(&client, &project, json!(six)).await["is_error"], true);
    assert!(!mem.join("knowledge/t0.md").exists() && !mem.join("todos/t0.md").exists());

    // Hand-written big files: load and search answers stay under the cap, with a note (the
    // full text, L2, is what can overflow it; overviews are cut at 1 KiB).
    for i in 0..8 {
        hand_write(
            &mem,
            &format!("sessions/s{i}.md"),
            &format!("session {i} deploy"),
            &format!("deploy notes {}", "lorem ipsum ".repeat(5_000)),
        );
    }
    let p = s(&project);
    for (tool, args) in [
        (
            "context_load",
            json!({ "project_path": p, "detail": "full" }),
        ),
        (
            "context_search",
            json!({ "project_path": p, "query": "deploy notes", "limit": 50, "detail": "full" }),
        ),
    ] {
        let r = call(&client, tool, args).await;
        let bytes = serde_json::to_string(&r).unwrap().len();
        assert!(bytes <= 16_000 + 64, "{tool}: {bytes} bytes");
        assert!(
            r["cut"]["note"].as_str().unwrap().contains("cap"),
            "{tool}: {r}"
        );
        let text = r.to_string();
        assert!(text.contains("[cut: "), "{tool}: no cut marker");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn every_refused_target_is_a_tool_error_with_the_reason() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    let r = save(
        &client,
        &project,
        json!([{ "type": "todo", "title": "real", "content": "do it" }]),
    )
    .await;
    assert_eq!(r["written"], 1);
    let mem = memory_dir(&fx, &project);
    let outside = fx.base.join("outside.md");
    std::fs::write(&outside, "---\nname: o\n---\nsecret stuff\n").unwrap();
    std::os::unix::fs::symlink(&outside, mem.join("todos/escape.md")).unwrap();
    std::os::unix::fs::symlink(&fx.base, mem.join("linkdir")).unwrap();
    for target in [
        "todos/escape.md",
        "linkdir/outside.md",
        "../outside.md",
        "/etc/passwd",
        "MEMORY.md",
        "todos/missing.md",
    ] {
        for (action, content) in [("update", Some("new text")), ("delete", None)] {
            let mut args =
                json!({ "project_path": s(&project), "action": action, "target": target });
            if let Some(c) = content {
                args["content"] = json!(c);
            }
            let r = call(&client, "context_manage", args).await;
            assert_eq!(r["is_error"], true, "{action} {target}: {r}");
            assert!(r.get("available").is_none(), "{action} {target}: {r}");
            assert!(!r["reason"].as_str().unwrap().is_empty());
        }
    }
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "---\nname: o\n---\nsecret stuff\n"
    );
}

#[tokio::test]
async fn reads_never_create_a_file() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let mem = memory_dir(&fx, &project);
    hand_write(
        &mem,
        "decisions/db.md",
        "use postgres",
        "We use Postgres 16.",
    );
    hand_write(&mem, "sessions/s1.md", "first session", "Set up CI.");
    let before = Fixture::files_under(&fx.base);
    let client = connect(fx.config()).await;
    let p = s(&project);
    call(&client, "context_load", json!({ "project_path": p })).await;
    call(
        &client,
        "context_search",
        json!({ "project_path": p, "query": "postgres" }),
    )
    .await;
    call(
        &client,
        "context_manage",
        json!({ "project_path": p, "action": "list" }),
    )
    .await;
    let other = fx.project("fresh");
    call(
        &client,
        "context_load",
        json!({ "project_path": s(&other) }),
    )
    .await;
    call(
        &client,
        "context_search",
        json!({ "project_path": s(&other), "query": "x" }),
    )
    .await;
    call(
        &client,
        "context_manage",
        json!({ "project_path": s(&other), "action": "list" }),
    )
    .await;
    let uri = format!("{RESOURCE_PREFIX}{}/MEMORY.md", project_id(&project));
    read_resource(&client, &uri).await;
    client.list_resources(None).await.unwrap();
    let mut after = Fixture::files_under(&fx.base);
    after.retain(|f| !f.ends_with("fresh"));
    assert_eq!(before, after);
    assert!(!mem.join(".memloop.lock").exists());
}

#[tokio::test]
async fn update_refreshes_the_description_and_the_index_line() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    let saved = save(
        &client,
        &project,
        json!([{ "type": "decision", "title": "Database", "content": "Use MySQL 8." }]),
    )
    .await;
    let r = call(
        &client,
        "context_manage",
        json!({ "project_path": s(&project), "action": "update",
                "target": "decisions/database.md", "content": "Use Postgres 16 instead.",
                "expected_version": saved["results"][0]["version"] }),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    let mem = memory_dir(&fx, &project);
    let index = std::fs::read_to_string(mem.join("MEMORY.md")).unwrap();
    assert!(index.contains("Use Postgres 16 instead."), "{index}");
    assert!(!index.contains("MySQL"), "{index}");
    let file = std::fs::read_to_string(mem.join("decisions/database.md")).unwrap();
    assert!(
        file.contains("description: Use Postgres 16 instead."),
        "{file}"
    );
    assert!(file.contains("name: Database"), "{file}");
}

#[tokio::test]
async fn init_project_says_what_it_did() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    let p = s(&project);
    let r = call(
        &client,
        "context_manage",
        json!({ "project_path": p, "action": "init_project" }),
    )
    .await;
    assert_eq!(r["is_error"], false, "{r}");
    assert_eq!(r["created"], true, "{r}");
    let mem = memory_dir(&fx, &project);
    // The server-side path is the server's own: not in the answer.
    assert!(!r.to_string().contains(&s(&mem)), "{r}");
    assert!(mem.is_dir());
    assert!(!mem.join("MEMORY.md").exists());
    assert!(!r.to_string().contains("(and index)"));
    let again = call(
        &client,
        "context_manage",
        json!({ "project_path": p, "action": "init_project" }),
    )
    .await;
    assert_eq!(again["created"], false, "{again}");
}

#[tokio::test]
async fn projects_under_the_root_are_listed_before_any_call_with_one_mime_type() {
    let fx = Fixture::new();
    let (a, b, bare) = (fx.project("a"), fx.project("b"), fx.project("bare"));
    hand_write(&memory_dir(&fx, &a), "decisions/x.md", "x", "x body");
    hand_write(&memory_dir(&fx, &b), "decisions/y.md", "y", "y body");
    {
        // b has an index.
        let client = connect(fx.config()).await;
        save(
            &client,
            &b,
            json!([{ "type": "todo", "title": "t", "content": "c" }]),
        )
        .await;
    }
    let client = connect(fx.config()).await;
    let listed = client.list_resources(None).await.unwrap().resources;
    let uris: Vec<String> = listed.iter().map(|r| r.uri.clone()).collect();
    for p in [&a, &b] {
        let uri = format!("{RESOURCE_PREFIX}{}/MEMORY.md", project_id(p));
        assert!(uris.contains(&uri), "{uri} not in {uris:?}");
        let listed_mime = listed
            .iter()
            .find(|r| r.uri == uri)
            .unwrap()
            .mime_type
            .clone();
        let (_, read_mime) = read_resource(&client, &uri).await;
        assert_eq!(listed_mime.as_deref(), Some(INDEX_MIME));
        assert_eq!(read_mime.as_deref(), Some(INDEX_MIME));
    }
    assert!(!uris.iter().any(|u| u.contains(&project_id(&bare))));
    let (text, _) = read_resource(
        &client,
        &format!("{RESOURCE_PREFIX}{}/MEMORY.md", project_id(&b)),
    )
    .await;
    assert!(text.contains("todos/t.md"), "{text}");
}

const TOKEN: &str = "ghp_abcdefghijklmnopqrstuvwxyz0123456789";
/// A Mailgun key's shape (the idempotency key of the same shape comes back intact: batch_save.rs).
const MAILGUN: &str = "key-0123456789abcdef0123456789abcdef";

#[tokio::test]
async fn credentials_in_hand_written_files_never_leave_the_process() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let mem = memory_dir(&fx, &project);
    hand_write(
        &mem,
        "knowledge/deploy.md",
        "deploy access",
        &format!(
            "Deploy with the bot token {TOKEN} on the CI box.\npassword = hunter2xyz\n\
             mail through {MAILGUN}"
        ),
    );
    hand_write(
        &mem,
        "todos/rotate.md",
        "rotate",
        &format!("rotate {TOKEN}"),
    );
    // Its name and description (what a list item shows) hold the key.
    hand_write(
        &mem,
        "knowledge/mail.md",
        &format!("почта {MAILGUN}"),
        "the mail relay",
    );
    std::fs::write(
        mem.join("MEMORY.md"),
        format!("- [deploy](knowledge/deploy.md) — token {TOKEN}\n"),
    )
    .unwrap();
    let client = connect(fx.config()).await;
    let p = s(&project);
    let answers = [
        call(&client, "context_load", json!({ "project_path": p })).await,
        call(
            &client,
            "context_search",
            json!({ "project_path": p, "query": "deploy token" }),
        )
        .await,
        call(
            &client,
            "context_manage",
            json!({ "project_path": p, "action": "list" }),
        )
        .await,
    ];
    for a in &answers {
        let text = a.to_string();
        assert!(
            !text.contains(TOKEN) && !text.contains("hunter2xyz") && !text.contains(MAILGUN),
            "{text}"
        );
    }
    // A list page's items are redacted when made and kept: the page made again of the kept
    // items counts what they withheld as the first did.
    let again = call(
        &client,
        "context_manage",
        json!({ "project_path": p, "action": "list" }),
    )
    .await;
    assert!(!again.to_string().contains(MAILGUN), "{again}");
    for a in answers.iter().chain([&again]) {
        assert!(a.to_string().contains("[redacted: "), "{a}");
        assert!(a["redacted"]["count"].as_u64().unwrap() >= 1, "{a}");
    }
    assert_eq!(answers[2]["redacted"], again["redacted"]);
    assert!(answers[1].to_string().contains("Deploy with the bot token"));
    let (text, _) = read_resource(
        &client,
        &format!("{RESOURCE_PREFIX}{}/MEMORY.md", project_id(&project)),
    )
    .await;
    assert!(
        !text.contains(TOKEN) && text.contains("[redacted: "),
        "{text}"
    );
}

/// Every string of `v` (at any depth), with where it is.
fn strings<'a>(v: &'a Value, at: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Value::String(s) => out.push((at, s)),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                strings(item, format!("{at}[{i}]"), out);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                strings(item, format!("{at}.{k}"), out);
            }
        }
        _ => {}
    }
}

#[tokio::test]
async fn terminal_escapes_in_any_line_of_a_memory_are_served_escaped() {
    let fx = Fixture::new();
    let project = fx.project("app");
    let mem = memory_dir(&fx, &project);
    // OSC (set the window title, ended by BEL), CSI (clear the screen) and a bare BEL, in the
    // third line of the body, where no write rule looks.
    let third = "see \x1b]0;pwned\x07 then \x1b[2J and \x07 done";
    hand_write(
        &mem,
        "knowledge/escapes.md",
        "terminal escapes",
        &format!("Escapes line one.\nline two\n{third}\nline four\ttabbed"),
    );
    let client = connect(fx.config()).await;
    let p = s(&project);
    let answers = [
        call(
            &client,
            "context_load",
            json!({ "project_path": p, "detail": "full" }),
        )
        .await,
        call(
            &client,
            "context_search",
            json!({ "project_path": p, "query": "escapes line", "detail": "full" }),
        )
        .await,
        call(
            &client,
            "context_search",
            json!({ "project_path": p, "query": "escapes line" }),
        )
        .await,
    ];
    for a in &answers {
        let mut all = Vec::new();
        strings(a, String::new(), &mut all);
        for (at, text) in all {
            assert!(
                !text
                    .chars()
                    .any(|c| c.is_control() && c != '\n' && c != '\t'),
                "{at} carries a control character: {text:?}"
            );
        }
    }
    let hit = &answers[1]["results"][0];
    assert_eq!(hit["path"], "knowledge/escapes.md", "{}", answers[1]);
    let content = hit["content"].as_str().unwrap();
    // Escaped, not dropped: the reader sees what the file holds; line feeds and tabs stay.
    assert!(
        content.contains(r"see \u{1b}]0;pwned\u{7} then \u{1b}[2J and \u{7} done"),
        "{content:?}"
    );
    assert!(content.contains("line two\n"), "{content:?}");
    assert!(content.contains("line four\ttabbed"), "{content:?}");
}
