//! The plans PostgreSQL keeps for the statements every request runs. A connection prepares each
//! statement once and, after a few runs, keeps one generic plan for it: made when the tables may
//! have been small or never analyzed, and kept as they grow. These tests hold the statements to
//! what that needs: a kept plan that stays cheap whatever the statistics, and one that is kept
//! at all (a statement whose plan for the values always looks cheaper is planned again on every
//! run).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::changes::FEED;
use crate::store::{INDEX_MARKS, INDEX_START, NAME, PgMemoryStore};
use tokio_postgres::{Client, NoTls, SimpleQueryMessage};

/// The machine's PostgreSQL (trust auth), as the integration tests reach it.
const URL: &str = "host=127.0.0.1 port=5432 user=root dbname=test";

/// Runs `check` on a connection whose search_path is a fresh, migrated schema holding project
/// `p`, then drops the schema (also when `check` fails: its error is returned after).
async fn in_schema<T>(check: impl AsyncFnOnce(&Client) -> Result<T, tokio_postgres::Error>) -> T {
    let schema = format!("memloop_plans_{}", uuid::Uuid::new_v4().simple());
    PgMemoryStore::open(crate::PgConfig::new(URL, "p").schema(&schema))
        .await
        .unwrap();
    let (client, conn) = tokio_postgres::connect(URL, NoTls).await.unwrap();
    let conn = tokio::spawn(conn);
    let checked = match client
        .batch_execute(&format!("SET search_path = {schema}"))
        .await
    {
        Ok(()) => check(&client).await,
        Err(e) => Err(e),
    };
    let dropped = client
        .batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .await;
    drop(client);
    let _ = conn.await;
    dropped.unwrap();
    checked.unwrap()
}

/// The first row's first column of a simple query's answer.
async fn first_value(client: &Client, sql: &str) -> Result<String, tokio_postgres::Error> {
    let answer = client.simple_query(sql).await?;
    Ok(answer
        .iter()
        .find_map(|m| match m {
            SimpleQueryMessage::Row(row) => row.get(0).map(str::to_owned),
            _ => None,
        })
        .expect("a row"))
}

/// Every scan of `memloop_memories` in an `EXPLAIN (FORMAT JSON)` plan, as
/// `(node type, index condition)`.
fn memory_scans(plan: &serde_json::Value, out: &mut Vec<(String, String)>) {
    if plan.get("Relation Name").and_then(|r| r.as_str()) == Some("memloop_memories") {
        let field = |k: &str| {
            plan.get(k)
                .and_then(|v| v.as_str())
                .unwrap_or("")
                .to_owned()
        };
        out.push((field("Node Type"), field("Index Cond")));
    }
    for child in plan
        .get("Plans")
        .and_then(|p| p.as_array())
        .into_iter()
        .flatten()
    {
        memory_scans(child, out);
    }
}

/// The change feed keeps the plan it made when the project was empty; once the project has
/// thousands of memories, that plan must still look each change's memory up by its key, not
/// read the project's memories (which made some load runs twice as costly for the database).
#[tokio::test]
async fn the_feed_looks_each_memory_up_by_its_key_whatever_the_statistics() {
    let plan = in_schema(async |client| {
        client
            .batch_execute(&format!(
                "SET plan_cache_mode = force_generic_plan;
                 PREPARE feed(text, text, bigint, text) AS {FEED};
                 EXECUTE feed('p', '1', 64, '1:1:');
                 INSERT INTO memloop_memories (project_id, rel_path, name, description, body,
                     content, sha256, version, updated_by, write_id)
                 SELECT 'p', 'note_' || i || '.md', 'note ' || i, 'about ' || i,
                        repeat('body ', 200), repeat('text ', 200), 'sha', 1, 'test',
                        gen_random_uuid()
                 FROM generate_series(1, 5000) AS i"
            ))
            .await?;
        first_value(
            client,
            "EXPLAIN (FORMAT JSON) EXECUTE feed('p', '1', 64, '1:1:')",
        )
        .await
    })
    .await;
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let plan = &plan[0]["Plan"];
    let mut scans = Vec::new();
    memory_scans(plan, &mut scans);
    assert!(!scans.is_empty(), "no scan of the memories in {plan:#}");
    for (node, cond) in &scans {
        assert!(
            node.starts_with("Index") && cond.contains("rel_path"),
            "the feed reads memories with a {node} ({cond}): {plan:#}"
        );
    }
}

/// The names a save reads before its batch are looked up with a plan the connection keeps: run
/// as often as a save runs, the statement is not planned again each time.
#[tokio::test]
async fn the_names_lookup_keeps_its_plan() {
    let (generic, custom) = in_schema(async |client| {
        client
            .batch_execute(&format!(
                "INSERT INTO memloop_memories (project_id, rel_path, name, description, body,
                     content, sha256, version, updated_by, write_id)
                 SELECT 'p', 'note_' || i || '.md', 'note ' || i, '', '', '', 'sha', 1, 'test',
                        gen_random_uuid()
                 FROM generate_series(1, 3000) AS i;
                 ANALYZE memloop_memories;
                 PREPARE names AS {NAME};"
            ))
            .await?;
        for i in 0..12 {
            client
                .batch_execute(&format!("EXECUTE names('p', 'note_{i}.md')"))
                .await?;
        }
        let counts = first_value(
            client,
            "SELECT generic_plans || ',' || custom_plans FROM pg_prepared_statements
             WHERE name = 'names'",
        )
        .await?;
        let (g, c) = counts.split_once(',').expect("two counts");
        Ok((g.parse::<u32>().unwrap(), c.parse::<u32>().unwrap()))
    })
    .await;
    assert!(
        generic >= 6 && custom <= 6,
        "{generic} runs with the kept plan, {custom} planned again"
    );
}

/// Loading the index reads its first lines (or their marks) through their partial index and
/// stops at the limit, with the plan the connection keeps: not every memory of a project of
/// thousands.
#[tokio::test]
async fn the_index_start_reads_its_first_lines_in_order_whatever_the_statistics() {
    for statement in [INDEX_START, INDEX_MARKS] {
        index_start_plan(statement).await;
    }
}

async fn index_start_plan(statement: &'static str) {
    let plan = in_schema(async |client| {
        client
            .batch_execute(&format!(
                "SET plan_cache_mode = force_generic_plan;
                 PREPARE start(text, bigint) AS {statement};
                 EXECUTE start('p', 200);
                 INSERT INTO memloop_memories (project_id, rel_path, name, description, body,
                     content, sha256, version, updated_by, write_id)
                 SELECT 'p', 'note_' || i || '.md', 'note ' || i, 'about ' || i,
                        repeat('body ', 20), repeat('text ', 20), 'sha', 1, 'test',
                        gen_random_uuid()
                 FROM generate_series(1, 5000) AS i;
                 ANALYZE memloop_memories;"
            ))
            .await?;
        first_value(client, "EXPLAIN (FORMAT JSON) EXECUTE start('p', 200)").await
    })
    .await;
    let plan: serde_json::Value = serde_json::from_str(&plan).unwrap();
    let plan = &plan[0]["Plan"];
    // The rows themselves under a limit, or their marks aggregated over one.
    let limit = if plan["Node Type"] == "Limit" {
        Some(plan)
    } else {
        plan["Plans"]
            .as_array()
            .and_then(|p| p.iter().find(|n| n["Node Type"] == "Limit"))
    };
    assert!(limit.is_some(), "{plan:#}");
    let mut scans = Vec::new();
    memory_scans(plan, &mut scans);
    assert_eq!(scans.len(), 1, "{plan:#}");
    assert!(
        scans[0].0.starts_with("Index") && !plan.to_string().contains("\"Sort\""),
        "the index start reads memories with a {:?}: {plan:#}",
        scans[0]
    );
}
