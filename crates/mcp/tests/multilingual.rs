//! The server in the languages its users write: a project whose path is not ASCII, entries
//! titled and written in Chinese, Japanese, Korean and Russian, found by queries in the same
//! language (no spaces in Chinese and Japanese, another inflection in Russian, a particle in
//! Korean), updated and deleted by their paths, and credentials written in those languages
//! refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::{Value, json};
use support::{Client, Fixture, call, connect, s, save};

fn paths(results: &Value) -> Vec<String> {
    results
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["path"].as_str().unwrap_or_default().to_owned())
        .collect()
}

async fn top_hit(client: &Client, project: &str, query: &str) -> String {
    let r = call(
        client,
        "context_search",
        json!({ "project_path": project, "query": query }),
    )
    .await;
    assert_eq!(r["is_error"], false, "{query}: {r}");
    let found = paths(&r["results"]);
    assert!(!found.is_empty(), "{query}: nothing found: {r}");
    found[0].clone()
}

#[tokio::test]
async fn entries_in_four_languages_are_saved_found_updated_and_deleted() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("记忆项目-メモ");
    let p = s(&project);
    let saved = save(
        &client,
        &project,
        json!([
            { "type": "decision", "title": "主数据库选型",
              "content": "我们决定使用PostgreSQL作为主数据库，放弃MySQL。" },
            { "type": "knowledge", "title": "デプロイ手順",
              "content": "デプロイは毎週金曜日にステージングで確認してから本番に出す。" },
            { "type": "todo", "title": "캐시 교체",
              "content": "캐시는 Redis로 바꾸기로 했다. 다음 주까지 완료." },
            { "type": "decision", "title": "Хранилище логов",
              "content": "Логи храним в ClickHouse, базы данных для логов не трогаем." },
        ]),
    )
    .await;
    assert_eq!(saved["written"], 4, "{saved}");
    let written = paths(&saved["results"]);
    let unique: std::collections::BTreeSet<_> = written.iter().collect();
    assert_eq!(unique.len(), 4, "four titles, four files: {written:?}");

    // Queries in each language, phrased differently from the entry.
    assert_eq!(top_hit(&client, &p, "数据库").await, written[0]);
    assert_eq!(top_hit(&client, &p, "本番デプロイ").await, written[1]);
    assert_eq!(top_hit(&client, &p, "캐시").await, written[2]);
    assert_eq!(top_hit(&client, &p, "логи в базе данных").await, written[3]);

    // The load answer carries the text as written.
    let load = call(&client, "context_load", json!({ "project_path": p })).await;
    assert_eq!(load["registered"], true, "{load}");
    let load_text = load.to_string();
    assert!(load_text.contains("主数据库选型"), "{load}");
    assert!(load_text.contains("캐시 교체"), "{load}");

    // Update the Russian decision by its path; search follows the new text.
    let upd = call(
        &client,
        "context_manage",
        json!({ "project_path": p, "action": "update", "target": written[3],
                "content": "Логи переносим в Loki, ClickHouse больше не используем.",
                "expected_version": saved["results"][3]["version"] }),
    )
    .await;
    assert_eq!(upd["is_error"], false, "{upd}");
    assert_eq!(top_hit(&client, &p, "Loki").await, written[3]);

    // Delete the Japanese entry; it is no longer found.
    let del = call(
        &client,
        "context_manage",
        json!({ "project_path": p, "action": "delete", "target": written[1] }),
    )
    .await;
    assert_eq!(del["is_error"], false, "{del}");
    let after = call(
        &client,
        "context_search",
        json!({ "project_path": p, "query": "デプロイ" }),
    )
    .await;
    assert!(
        !paths(&after["results"]).contains(&written[1]),
        "deleted entry still found: {after}"
    );
}

#[tokio::test]
async fn credentials_in_other_languages_are_refused_and_nothing_is_stored() {
    let fx = Fixture::new();
    let client = connect(fx.config()).await;
    let project = fx.project("app");
    let secrets = [
        "生产数据库密码是 S3cr3tPass2024",
        "パスワード: Hunter2Secret99",
        "비밀번호: Qwerty!2024xyz",
        "Пароль от базы: Zx9Vb7Nm5Kl3",
    ];
    let entries: Vec<Value> = secrets
        .iter()
        .enumerate()
        .map(|(i, c)| json!({ "type": "knowledge", "title": format!("note {i}"), "content": c }))
        .collect();
    let r = save(&client, &project, json!(entries)).await;
    assert_eq!(r["is_error"], true, "{r}");
    assert_eq!(r["written"], 0, "{r}");
    assert_eq!(r["refused_entries"], secrets.len(), "{r}");
    let list = call(
        &client,
        "context_manage",
        json!({ "project_path": s(&project), "action": "list" }),
    )
    .await;
    for secret in secrets {
        let tail = secret.rsplit(' ').next().unwrap();
        assert!(!list.to_string().contains(tail), "{list}");
    }
    let files = Fixture::files_under(&fx.base);
    for f in &files {
        let path = fx.base.join(f);
        if path.is_file() {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            for secret in secrets {
                let tail = secret.rsplit(' ').next().unwrap();
                assert!(!text.contains(tail), "{f} holds a credential");
            }
        }
    }
}
