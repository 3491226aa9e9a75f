//! `memloop mcp` with the exporter on, as a user runs it (`OTEL_EXPORTER_OTLP_ENDPOINT` set),
//! driven by rmcp's client over stdio: its tool-call spans are read back from a real Arize
//! Phoenix through its REST API, with their names, attributes and counts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use rmcp::{ServiceExt, model::CallToolRequestParams, transport::TokioChildProcess};
use serde_json::{Value, json};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_servers_tool_calls_are_readable_in_phoenix() {
    let phoenix = match memloop_testkit::Phoenix::start().await {
        Ok(p) => p,
        Err(why) => {
            memloop_testkit::skip_unless_ci(why);
            return;
        }
    };
    let tmp = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(tmp.path()).unwrap();
    let (project, home) = (root.join("proj"), root.join("home"));
    std::fs::create_dir_all(&project).unwrap();
    let name = "memloop-mcp-phoenix-test";
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_memloop"));
    cmd.arg("--project")
        .arg(&project)
        .arg("mcp")
        .env("MEMLOOP_HOME", &home)
        .env("HOME", &home)
        .env("MEMLOOP_LOG", "error")
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &phoenix.url)
        .env(
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("openinference.project.name={name}"),
        );
    let client = ().serve(TokioChildProcess::new(cmd).unwrap()).await.unwrap();
    let path = project.to_string_lossy().into_owned();
    for (tool, args) in [
        (
            "context_save",
            json!({"project_path": path, "entries": [
                {"type": "decision", "title": "Release day", "content": "We release on Tuesdays."}
            ]}),
        ),
        (
            "context_search",
            json!({"project_path": path, "query": "release"}),
        ),
    ] {
        let Value::Object(map) = args else {
            unreachable!()
        };
        let answer = client
            .call_tool(CallToolRequestParams::new(tool).with_arguments(map))
            .await
            .unwrap();
        assert_ne!(answer.is_error, Some(true), "{tool}: {answer:?}");
    }
    // Closing stdin stops the server, which flushes its spans on the way out.
    client.cancel().await.unwrap();

    let spans = phoenix
        .spans_until(name, |spans| {
            spans
                .iter()
                .filter(|s| {
                    s["name"]
                        .as_str()
                        .is_some_and(|n| n.starts_with("tools/call"))
                })
                .count()
                == 2
        })
        .await
        .unwrap();
    let calls: Vec<&Value> = spans
        .iter()
        .filter(|s| {
            s["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("tools/call"))
        })
        .collect();
    let mut names: Vec<&str> = calls.iter().map(|s| s["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        ["tools/call context_save", "tools/call context_search"],
        "{spans:#?}"
    );
    for call in &calls {
        let a = &call["attributes"];
        assert_eq!(a["mcp.method.name"], "tools/call");
        assert_eq!(a["gen_ai.operation.name"], "execute_tool");
        assert!(
            a["gen_ai.tool.name"]
                .as_str()
                .is_some_and(|t| t.starts_with("context_"))
        );
        assert!(a.get("error.type").is_none_or(Value::is_null), "{call:#}");
    }
    // No memory text reached the trace.
    assert!(
        !serde_json::to_string(&spans)
            .unwrap()
            .contains("We release on Tuesdays")
    );
}
