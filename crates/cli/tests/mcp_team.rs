//! `memloop mcp --database-url` over stdio (the built binary, rmcp's client): a project's
//! memories land in the team store under the id `memloop team` uses for the project dir, so
//! `memloop team pull` brings what an MCP client saved; `--team-project` is refused.
#![cfg(feature = "postgres")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rmcp::{ServiceExt, model::CallToolRequestParams, transport::TokioChildProcess};
use serde_json::{Value, json};
use std::path::Path;

const BIN: &str = env!("CARGO_BIN_EXE_memloop");
const PG: &str = "host=127.0.0.1 port=5432 user=root dbname=test";

async fn admin() -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(PG, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c
}

struct Schema(String);

impl Drop for Schema {
    fn drop(&mut self) {
        let sql = format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0);
        let _ = std::thread::spawn(move || {
            tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap()
                .block_on(async { admin().await.batch_execute(&sql).await })
        })
        .join();
    }
}

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
}

fn memloop(home: &Path) -> tokio::process::Command {
    let mut c = tokio::process::Command::new(BIN);
    c.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("MEMLOOP_HOME", home.join("base"))
        .env("MEMLOOP_LOG", "error");
    c
}

#[tokio::test]
async fn an_mcp_save_reaches_the_team_store_under_the_team_project_id() {
    let schema = Schema(format!("memloop_mcpteam_{}", std::process::id()));
    admin()
        .await
        .batch_execute(&format!("CREATE SCHEMA {}", schema.0))
        .await
        .unwrap();
    let url = format!("{PG} options='-c search_path={}'", schema.0);
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (project, home, pulled) = (base.join("後端"), base.join("home"), base.join("pulled"));
    for d in [&project, &home] {
        std::fs::create_dir_all(d).unwrap();
    }
    git(&project, &["init", "-q"]);
    git(
        &project,
        &[
            "remote",
            "add",
            "origin",
            "https://bot:s3cret@example.com/acme/后端.git",
        ],
    );

    let mut cmd = memloop(&home);
    cmd.arg("--project")
        .arg(&project)
        .args(["--database-url", &url, "mcp"]);
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let args = json!({ "project_path": project.to_string_lossy(), "entries": [
        { "type": "decision", "title": "缓存策略", "content": "Redis 只做缓存，不存会话。" }] });
    let Value::Object(map) = args else { panic!() };
    let r = client
        .call_tool(CallToolRequestParams::new("context_save").with_arguments(map))
        .await
        .unwrap();
    let v = r.structured_content.unwrap();
    assert_eq!(v["results"][0]["status"], "written", "{v}");
    // The store's kind only: no URL, user or host reaches a client.
    assert_eq!(v["project"]["store"], "postgres", "{v}");
    assert!(!v.to_string().contains("s3cret"), "{v}");
    let rel = v["results"][0]["path"].as_str().unwrap().to_owned();
    client.cancel().await.unwrap();

    // The row is under the origin URL without its credentials, as `memloop team` names it.
    let rows = admin()
        .await
        .query(
            &format!(
                "SELECT project_id, rel_path FROM {}.memloop_memories",
                schema.0
            ),
            &[],
        )
        .await
        .unwrap();
    let got: Vec<(String, String)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(
        got,
        vec![("https://example.com/acme/后端.git".to_owned(), rel.clone())]
    );

    // `memloop team pull` for the same project dir brings it into a memory dir.
    let out = memloop(&home)
        .arg("--project")
        .arg(&project)
        .arg("--memory-dir")
        .arg(&pulled)
        .args(["--database-url", &url, "team", "pull"])
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let text = std::fs::read_to_string(pulled.join(&rel)).unwrap();
    assert!(text.contains("Redis 只做缓存"), "{text}");

    // One server serves many projects: a single --team-project is refused.
    let out = memloop(&home)
        .arg("--project")
        .arg(&project)
        .args(["--database-url", &url, "--team-project", "x", "mcp"])
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--team-project"),
        "{out:?}"
    );
}
