//! The loop's spans, exported over OTLP/HTTP, read back from a real Arize Phoenix (`.ci/run`
//! installs `arize-phoenix` into a virtualenv and names its `phoenix` in `MEMLOOP_PHOENIX`):
//! Phoenix is started on free loopback ports with a temporary working dir, one session of the
//! scripted model (it says so) with memory on runs with the export, and the spans are read
//! back through Phoenix's REST API: names, the GenAI attributes, nesting and counts.
#![cfg(feature = "otel")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop::MemorySetup;
use memloop::core::Agent;
use memloop::host::env::EnvVars;
use memloop::memory::paths::MemoryDirResolver;
use memloop::otel::{OtlpConfig, OtlpExport};
use memloop::testkit::{ScriptStep, ScriptedModel};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;
use tracing::instrument::WithSubscriber;
use tracing_subscriber::layer::SubscriberExt;

use memloop_testkit::Phoenix;

/// Start Phoenix, or `None` (skipped outside CI) when it is not installed.
async fn phoenix() -> Option<Phoenix> {
    match Phoenix::start().await {
        Ok(server) => Some(server),
        Err(why) => {
            memloop::testkit::skip_unless_ci(why);
            None
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_readable_in_phoenix() {
    let Some(phoenix) = phoenix().await else {
        return;
    };
    let project = "memloop-phoenix-test";
    let env = EnvVars::from_pairs([
        ("OTEL_EXPORTER_OTLP_ENDPOINT", phoenix.url.clone()),
        ("OTEL_SERVICE_NAME", "memloop-test".into()),
        (
            "OTEL_RESOURCE_ATTRIBUTES",
            format!("openinference.project.name={project}"),
        ),
    ]);
    let config = OtlpConfig::from_env(&env).unwrap().unwrap();
    let export = tokio::task::spawn_blocking(move || OtlpExport::start(&config))
        .await
        .unwrap()
        .unwrap();
    let subscriber = tracing_subscriber::registry().with(export.layer());

    let home = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let model = ScriptedModel::new()
        .on_purpose("main", |req| {
            let answered = req
                .messages
                .last()
                .is_some_and(|m| m.tool_result_ids().next().is_some());
            Some(match answered {
                false => ScriptStep::tool(
                    "memory_write",
                    serde_json::json!({"topic": "release_day", "content": "Releases go out on Tuesdays.",
                        "description": "release day", "type": "project"}),
                ),
                true => ScriptStep::text("Saved."),
            })
        })
        .on_purpose("extractor", |_| Some(ScriptStep::text("nothing new")))
        .on_purpose("session_memory", |_| Some(ScriptStep::text("noted")));
    let session = {
        let model = model.clone();
        let memory_env = EnvVars::from_pairs([("MEMLOOP_HOME", home.path().to_str().unwrap())]);
        async move {
            let memory =
                MemorySetup::with_resolver(MemoryDirResolver::new(work.path()), memory_env)
                    .unwrap();
            let mut agent = memory
                .attach(Agent::builder(Arc::new(model)))
                .unwrap()
                .build();
            agent
                .run_turn("Remember that we release on Tuesdays.")
                .await
                .unwrap();
            assert!(agent.drain(Duration::from_secs(30)).await.completed);
            let session = agent.config().session_id.clone();
            drop(agent);
            session
        }
        .with_subscriber(subscriber)
        .await
    };
    tokio::task::spawn_blocking(move || export.shutdown())
        .await
        .unwrap()
        .unwrap();

    // Read the spans back (Phoenix writes them asynchronously: until they are all there).
    let spans = phoenix
        .spans_until(project, |spans| {
            spans.iter().any(|s| s["name"] == "invoke_agent main")
        })
        .await
        .unwrap();
    let named =
        |name: &str| -> Vec<&Value> { spans.iter().filter(|s| s["name"] == name).collect() };
    let agent = named("invoke_agent main");
    assert_eq!(agent.len(), 1, "{spans:#?}");
    let agent = agent[0];
    assert_eq!(agent["attributes"]["gen_ai.conversation.id"], session);
    let turn = named("turn");
    assert_eq!(turn.len(), 1);
    assert_eq!(turn[0]["parent_id"], agent["context"]["span_id"]);

    // One chat span per request the scripted model answered, main and forks alike.
    let chats = named("chat scripted");
    let answered = ["main", "extractor", "session_memory"]
        .iter()
        .map(|p| model.requests_for(p).len())
        .sum::<usize>();
    assert_eq!(chats.len(), answered, "{chats:#?}");
    let by_purpose: HashMap<String, usize> = chats.iter().fold(HashMap::new(), |mut m, c| {
        *m.entry(
            c["attributes"]["memloop.purpose"]
                .as_str()
                .unwrap()
                .to_owned(),
        )
        .or_default() += 1;
        m
    });
    assert_eq!(by_purpose["main"], model.requests_for("main").len());
    for chat in &chats {
        let a = &chat["attributes"];
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "memloop.scripted");
        assert_eq!(a["gen_ai.request.model"], "scripted");
        assert_eq!(chat["context"]["trace_id"], agent["context"]["trace_id"]);
    }
    // The main agent's requests sit under the turn.
    assert!(
        chats
            .iter()
            .filter(|c| c["attributes"]["memloop.purpose"] == "main")
            .all(|c| c["parent_id"] == turn[0]["context"]["span_id"])
    );
    let tool = named("execute_tool memory_write");
    assert_eq!(tool.len(), 1, "{spans:#?}");
    assert_eq!(tool[0]["attributes"]["gen_ai.tool.name"], "memory_write");
    assert_eq!(tool[0]["parent_id"], turn[0]["context"]["span_id"]);
    // No message text reached Phoenix.
    let leaked: Vec<&Value> = spans
        .iter()
        .filter(|s| s.to_string().contains("Tuesdays"))
        .collect();
    assert!(leaked.is_empty(), "message text exported: {leaked:#?}");
}
