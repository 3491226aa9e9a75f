//! The seed's contract: `context_load` in its shape, `global/` knowledge shared by every
//! project, the `CLAUDE.md` usage block, search result fields, and two projects served by one
//! process never seeing each other's entries.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// Some tests need Unix (symlinks, socket pairs) and are compiled out elsewhere, with their helpers.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

mod support;

use memloop_mcp::{BLOCK_BEGIN, BLOCK_END, project_id};
use serde_json::json;
use support::{Fixture, call, connect, s, save};

#[tokio::test]
async fn context_load_has_the_seeds_shape() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    let p = s(&project);
    let unknown = call(&client, "context_load", json!({ "project_path": p })).await;
    assert_eq!(unknown["registered"], false, "{unknown}");
    assert_eq!(unknown["project_id"], project_id(&project));
    assert!(unknown["hint"].as_str().unwrap().contains("init_project"));

    save(
        &client,
        &project,
        json!([
            { "type": "session_summary", "title": "Cart", "content": "Finished the shopping cart.\n\nDetails follow." },
            { "type": "todo", "title": "Payment API", "content": "Hook up the payment API." },
            { "type": "decision", "title": "Database", "content": "Postgres 16 confirmed." },
        ]),
    )
    .await;
    let l = call(&client, "context_load", json!({ "project_path": p })).await;
    assert_eq!(l["registered"], true, "{l}");
    assert_eq!(l["project_id"], project_id(&project));
    assert!(l["last_session"].as_str().unwrap().contains('T'));
    // The summary is an overview of the project, not a count line (the counts are apart).
    let summary = l["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("app: 3 memories. Last session (20"),
        "{summary}"
    );
    assert!(
        summary.ends_with("): Finished the shopping cart. Decided: Database. Open: Payment API."),
        "{summary}"
    );
    assert_eq!(l["counts"]["sessions"], 1, "{l}");
    assert_eq!(l["counts"]["todos"], 1, "{l}");
    let recent = &l["recent_sessions"][0];
    assert_eq!(recent["date"].as_str().unwrap().len(), 10, "{recent}");
    // No summary model: the overview (L1) is the text itself, cut at 1 KiB.
    assert_eq!(
        recent["summary"],
        "Finished the shopping cart.\n\nDetails follow."
    );
    assert_eq!(recent["tier"], "L1");
    assert_eq!(recent["summary_state"], "none");
    assert_eq!(l["pending_items"], json!(["Payment API"]));
    assert_eq!(
        l["active_decisions"],
        json!(["Database: Postgres 16 confirmed."])
    );
    assert_eq!(l["decisions"][0]["path"], "decisions/database.md");
    assert_eq!(l["open_todos"][0]["path"], "todos/payment-api.md");
}

#[tokio::test]
async fn search_results_carry_the_seeds_fields() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    save(
        &client,
        &project,
        json!([
            { "type": "decision", "title": "Payments", "content": "Chose Stripe for payments after comparing." },
            { "type": "change", "title": "Stripe client", "content": "Added the Stripe client library." },
            { "type": "knowledge", "title": "Deploy", "content": "Deploys run on Tuesdays." },
        ]),
    )
    .await;
    let r = call(
        &client,
        "context_search",
        json!({ "project_path": s(&project), "query": "stripe payments" }),
    )
    .await;
    assert_eq!(r["mode"], "bm25", "{r}");
    let results = r["results"].as_array().unwrap();
    assert!(results.len() >= 2, "{r}");
    assert_eq!(results[0]["type"], "decision");
    assert_eq!(results[0]["relevance"], 1.0);
    for hit in results {
        let rel = hit["relevance"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&rel), "{hit}");
        assert_eq!(hit["date"].as_str().unwrap().len(), 10);
        for f in ["path", "title", "content", "type"] {
            assert!(hit[f].is_string(), "{f} missing in {hit}");
        }
        assert_eq!(hit["global"], false);
    }
}

#[tokio::test]
async fn global_knowledge_is_stored_once_and_seen_by_every_project() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let (a, b) = (fx.project("a"), fx.project("b"));
    let r = save(
        &client,
        &a,
        json!([{ "type": "knowledge", "title": "Company style guide",
                 "content": "All services log in JSON lines.", "global": true }]),
    )
    .await;
    assert_eq!(
        r["results"][0]["path"], "global/knowledge/company-style-guide.md",
        "{r}"
    );
    let global_dir = fx.home.join("global/memory");
    assert!(
        global_dir
            .join("knowledge/company-style-guide.md")
            .is_file()
    );
    assert!(
        !memloop_paths::project_dir(&fx.home, &a)
            .join("memory/knowledge/company-style-guide.md")
            .exists()
    );
    for p in [&a, &b] {
        let l = call(&client, "context_load", json!({ "project_path": s(p) })).await;
        let g = &l["global_knowledge"][0];
        assert_eq!(g["path"], "global/knowledge/company-style-guide.md", "{l}");
        assert_eq!(g["global"], true);
        let r = call(
            &client,
            "context_search",
            json!({ "project_path": s(p), "query": "json logging services" }),
        )
        .await;
        assert_eq!(r["results"][0]["global"], true, "{r}");
        assert_eq!(
            r["results"][0]["path"],
            "global/knowledge/company-style-guide.md"
        );
    }
    // Managed through the `global/` prefix.
    let del = call(
        &client,
        "context_manage",
        json!({ "project_path": s(&b), "action": "delete",
                "target": "global/knowledge/company-style-guide.md" }),
    )
    .await;
    assert_eq!(del["is_error"], false, "{del}");
    assert!(!global_dir.join("knowledge/company-style-guide.md").exists());
}

#[tokio::test]
async fn two_projects_in_one_process_never_see_each_others_entries() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let (a, b) = (fx.project("alpha"), fx.project("beta"));
    save(
        &client,
        &a,
        json!([{ "type": "decision", "title": "Alpha database", "content": "alpha uses Postgres zebra" }]),
    )
    .await;
    save(
        &client,
        &b,
        json!([{ "type": "decision", "title": "Beta database", "content": "beta uses SQLite giraffe" }]),
    )
    .await;
    for (mine, theirs, word) in [(&a, "giraffe", "zebra"), (&b, "zebra", "giraffe")] {
        let p = s(mine);
        let answers = [
            call(&client, "context_load", json!({ "project_path": p })).await,
            call(
                &client,
                "context_search",
                json!({ "project_path": p, "query": theirs, "limit": 50 }),
            )
            .await,
            call(
                &client,
                "context_search",
                json!({ "project_path": p, "query": "database", "limit": 50 }),
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
            assert!(!a.to_string().contains(theirs), "{a}");
        }
        assert!(answers[0].to_string().contains(word));
        // The other project's paths are not reachable as targets either.
        let other = if mine == &a {
            "beta-database"
        } else {
            "alpha-database"
        };
        let r = call(
            &client,
            "context_manage",
            json!({ "project_path": p, "action": "delete", "target": format!("decisions/{other}.md") }),
        )
        .await;
        assert_eq!(r["is_error"], true, "{r}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn init_project_writes_the_usage_block_once_between_markers() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    let claude_md = project.join("CLAUDE.md");
    std::fs::write(&claude_md, "# App\n\nOur rules.\n").unwrap();
    let init = json!({ "project_path": s(&project), "action": "init_project" });
    let r = call(&client, "context_manage", init.clone()).await;
    assert_eq!(r["claude_md"], "updated", "{r}");
    let text = std::fs::read_to_string(&claude_md).unwrap();
    assert!(text.starts_with("# App\n\nOur rules.\n"), "{text}");
    assert!(text.contains(BLOCK_BEGIN) && text.contains(BLOCK_END));
    for tool in ["context_load", "context_search", "context_save"] {
        assert!(text.contains(tool), "{tool} not in the block");
    }
    let r = call(&client, "context_manage", init.clone()).await;
    assert_eq!(r["claude_md"], "unchanged", "{r}");
    assert_eq!(std::fs::read_to_string(&claude_md).unwrap(), text);

    // Text the user adds after the block survives a re-run.
    std::fs::write(&claude_md, format!("{text}\n## Mine\n")).unwrap();
    call(&client, "context_manage", init).await;
    let after = std::fs::read_to_string(&claude_md).unwrap();
    assert!(after.ends_with("## Mine\n") && after.matches(BLOCK_BEGIN).count() == 1);

    // Turned off per call, and for the whole server.
    let other = fx.project("other");
    let r = call(
        &client,
        "context_manage",
        json!({ "project_path": s(&other), "action": "init_project", "claude_md": false }),
    )
    .await;
    assert_eq!(r["claude_md"], "skipped");
    let mut config = fx.config();
    config.no_claude_md = true;
    let quiet = connect(config).await;
    call(
        &quiet,
        "context_manage",
        json!({ "project_path": s(&other), "action": "init_project" }),
    )
    .await;
    assert!(!other.join("CLAUDE.md").exists());

    // A symlinked CLAUDE.md is not followed.
    let linked = fx.project("linked");
    let target = fx.base.join("elsewhere.md");
    std::fs::write(&target, "keep").unwrap();
    std::os::unix::fs::symlink(&target, linked.join("CLAUDE.md")).unwrap();
    let r = call(
        &client,
        "context_manage",
        json!({ "project_path": s(&linked), "action": "init_project" }),
    )
    .await;
    assert!(
        r["claude_md"].as_str().unwrap().starts_with("not written"),
        "{r}"
    );
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
}

/// The overview quotes memories in whatever language they were saved in.
#[tokio::test]
async fn the_overview_speaks_the_memories_language() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("商城");
    save(
        &client,
        &project,
        json!([
            { "type": "session_summary", "title": "购物车", "content": "完成了购物车功能。\n\n细节见下。" },
            { "type": "todo", "title": "支付接口对接", "content": "对接支付宝。" },
            { "type": "decision", "title": "数据库方案", "content": "确认使用 PostgreSQL 16。" },
            { "type": "knowledge", "title": "Деплой", "content": "Деплой по вторникам." },
        ]),
    )
    .await;
    let l = call(
        &client,
        "context_load",
        json!({ "project_path": s(&project) }),
    )
    .await;
    let summary = l["summary"].as_str().unwrap();
    assert!(
        summary.starts_with("商城: 4 memories. Last session ("),
        "{summary}"
    );
    assert!(
        summary.ends_with(
            "): 完成了购物车功能。 Decided: 数据库方案. Open: 支付接口对接. Known: Деплой."
        ),
        "{summary}"
    );
}

/// `context_load` reads the recent sessions and the open todos together: each item carries its
/// own memory's text, whatever the number of each.
#[tokio::test]
async fn a_load_gives_each_session_and_todo_its_own_text() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    let p = project.to_str().unwrap();
    let mut entries = Vec::new();
    for i in 0..5 {
        entries.push(
            json!({ "type": "session_summary", "title": format!("Session {i}"),
                             "content": format!("Worked on part {i}.") }),
        );
    }
    for i in 0..4 {
        entries.push(json!({ "type": "todo", "title": format!("Todo {i}"),
                             "content": format!("Finish step {i}.") }));
    }
    save(&client, &project, json!(entries)).await;
    let l = call(&client, "context_load", json!({ "project_path": p })).await;
    let recent = l["recent_sessions"].as_array().unwrap();
    assert_eq!(recent.len(), 3, "{l}");
    for s in recent {
        let i = s["title"].as_str().unwrap().trim_start_matches("Session ");
        assert_eq!(s["summary"], format!("Worked on part {i}."), "{s}");
    }
    let todos = l["open_todos"].as_array().unwrap();
    assert_eq!(todos.len(), 4, "{l}");
    for t in todos {
        let i = t["title"].as_str().unwrap().trim_start_matches("Todo ");
        assert_eq!(t["content"], format!("Finish step {i}."), "{t}");
        assert!(t["version"].as_str().is_some_and(|v| v.len() == 64), "{t}");
    }
}

/// The overview names the newest few of a kind and counts the rest of the project's memories
/// of that kind, not of a list's cap: 60 knowledge memories are three named and 57 more.
#[tokio::test]
async fn the_overview_counts_every_memory_of_a_kind() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("wiki");
    let entries: Vec<_> = (0..60)
        .map(|i| json!({ "type": "knowledge", "title": format!("Заметка {i}"), "content": format!("知识 {i}") }))
        .collect();
    save(&client, &project, json!(entries)).await;
    let l = call(
        &client,
        "context_load",
        json!({ "project_path": s(&project) }),
    )
    .await;
    let summary = l["summary"].as_str().unwrap();
    assert!(summary.starts_with("wiki: 60 memories."), "{summary}");
    assert!(summary.contains(" Known: Заметка "), "{summary}");
    assert!(summary.ends_with(" (+57 more)."), "{summary}");
    assert_eq!(l["counts"]["knowledge"], 60, "{l}");
}
