//! `GET /metrics`: a real HTTP server with tokens takes a known load (saves, searches, a refused
//! tool call, bad tokens, a 403, a 429), and the Prometheus text it answers counts exactly that,
//! behind a token for every project, without memory text or tokens.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::Tokens;
use support::{Fixture, s};

const WRITER: &str = "writer-token-0123456789";
const READER: &str = "reader-token-0123456789";
/// Text saved in the memories: it must never show in the metrics.
const SECRET_TEXT: &str = "zebra-marmalade-sentinel";

const SAVES: usize = 3;
const SEARCHES: usize = 2;
const BAD_TOKENS: usize = 2;

fn call(id: usize, tool: &str, project: &str, extra: serde_json::Value) -> serde_json::Value {
    let mut args = serde_json::json!({ "project_path": project });
    if let (Some(a), serde_json::Value::Object(e)) = (args.as_object_mut(), extra) {
        a.extend(e);
    }
    serde_json::json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                       "params": {"name": tool, "arguments": args}})
}

async fn post(url: &str, token: Option<&str>, body: &serde_json::Value) -> reqwest::Response {
    let mut req = reqwest::Client::new()
        .post(url)
        .header("Accept", "application/json, text/event-stream")
        .json(body);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

/// A tool call answered 200; whether its result is a tool error.
async fn tool_error(r: reqwest::Response) -> bool {
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    v["result"]["isError"] == true
}

async fn scrape(addr: std::net::SocketAddr, token: Option<&str>) -> reqwest::Response {
    let mut req = reqwest::Client::new().get(format!("http://{addr}/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    req.send().await.unwrap()
}

/// The value of the sample `series` (name and labels as written), if present.
fn value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

fn requests(text: &str, tool: &str, status: &str) -> f64 {
    value(
        text,
        &format!("memloop_mcp_requests_total{{tool=\"{tool}\",status=\"{status}\"}}"),
    )
    .unwrap_or_else(|| panic!("no requests_total for {tool}/{status}:\n{text}"))
}

#[tokio::test]
async fn a_known_load_is_counted_exactly_and_the_metrics_need_a_token_for_every_project() {
    let fx = Fixture::new();
    let project = fx.project("metered");
    let tokens = Tokens::parse(&format!(
        "{WRITER}\n{READER} {}/* read\n",
        fx.root.display()
    ))
    .unwrap();
    // Each token may send exactly the load's requests at once, then none for a long while.
    let burst = SAVES + SEARCHES + 1;
    let limits = memloop_mcp::TokenLimits {
        concurrent: 0,
        rate: 0.001,
        burst: burst as u32,
    };
    let server = support::start_http_with(fx.config(), Some(tokens), None, None, limits).await;
    let p = s(&project);
    for i in 0..SAVES {
        let save = call(
            i,
            "context_save",
            &p,
            serde_json::json!({"entries": [{"type": "knowledge", "title": format!("fact {i}"),
                "content": format!("{SECRET_TEXT} number {i}")}]}),
        );
        assert!(!tool_error(post(&server.url, Some(WRITER), &save).await).await);
    }
    for i in 0..SEARCHES {
        let search = call(
            100 + i,
            "context_search",
            &p,
            serde_json::json!({"query": SECRET_TEXT}),
        );
        assert!(!tool_error(post(&server.url, Some(WRITER), &search).await).await);
    }
    // A tool call refused by the tool itself (no such memory): a tool error.
    let delete = call(
        200,
        "context_manage",
        &p,
        serde_json::json!({"action": "delete", "target": "knowledge/none-such.md"}),
    );
    assert!(tool_error(post(&server.url, Some(WRITER), &delete).await).await);
    // Past the burst: 429.
    let again = call(201, "context_load", &p, serde_json::json!({}));
    assert_eq!(post(&server.url, Some(WRITER), &again).await.status(), 429);
    // Bad tokens: 401; a read-only token saving: 403.
    for bad in 0..BAD_TOKENS {
        let token = format!("not-a-token-{bad}-0123456789");
        assert_eq!(post(&server.url, Some(&token), &again).await.status(), 401);
    }
    let save = call(
        300,
        "context_save",
        &p,
        serde_json::json!({"entries": [{"type": "knowledge", "content": SECRET_TEXT}]}),
    );
    assert_eq!(post(&server.url, Some(READER), &save).await.status(), 403);

    // The scrape: not counted against the token's (spent) limit.
    let r = scrape(server.addr, Some(WRITER)).await;
    assert_eq!(r.status(), 200);
    assert_eq!(
        r.headers()["content-type"],
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let text = r.text().await.unwrap();
    assert_eq!(requests(&text, "context_save", "ok"), SAVES as f64);
    assert_eq!(requests(&text, "context_search", "ok"), SEARCHES as f64);
    assert_eq!(requests(&text, "context_manage", "tool_error"), 1.0);
    assert_eq!(requests(&text, "context_load", "ok"), 0.0);
    assert_eq!(requests(&text, "context_save", "tool_error"), 0.0);
    assert_eq!(requests(&text, "context_save", "protocol_error"), 0.0);
    // The histogram counts each call once, its +Inf bucket is the count, and it has a sum.
    for (tool, status) in [
        ("context_save", "ok"),
        ("context_search", "ok"),
        ("context_manage", "tool_error"),
        ("context_load", "ok"),
    ] {
        let labels = format!("tool=\"{tool}\",status=\"{status}\"");
        let count = value(
            &text,
            &format!("memloop_mcp_request_duration_seconds_count{{{labels}}}"),
        );
        assert_eq!(
            count,
            Some(requests(&text, tool, status)),
            "{tool}/{status}"
        );
        let inf = value(
            &text,
            &format!("memloop_mcp_request_duration_seconds_bucket{{{labels},le=\"+Inf\"}}"),
        );
        assert_eq!(inf, count);
        let sum = value(
            &text,
            &format!("memloop_mcp_request_duration_seconds_sum{{{labels}}}"),
        )
        .unwrap();
        assert_eq!(sum > 0.0, count > Some(0.0), "{tool}/{status}: sum {sum}");
    }
    for (kind, n) in [
        ("unauthorized", BAD_TOKENS),
        ("forbidden", 1),
        ("token_limit", 1),
        ("session_cap", 0),
    ] {
        let series = format!("memloop_mcp_refusals_total{{kind=\"{kind}\"}}");
        assert_eq!(value(&text, &series), Some(n as f64), "{kind}\n{text}");
    }
    // The project cache holds the project the load used.
    assert!(
        value(&text, "memloop_cache_projects").unwrap() >= 1.0,
        "{text}"
    );
    assert!(value(&text, "memloop_cache_bytes").unwrap() > 0.0, "{text}");
    assert_eq!(value(&text, "memloop_cache_evictions_total"), Some(0.0));
    for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
        assert!(
            ["counter", "gauge", "histogram"].contains(&line.rsplit(' ').next().unwrap()),
            "{line}"
        );
    }
    // No memory text, no token, no project.
    for leak in [SECRET_TEXT, WRITER, READER, "metered", &p] {
        assert!(!text.contains(leak), "{leak} in the metrics");
    }

    // Without a valid token: 401; with a token limited to some projects: 403.
    for token in [None, Some("not-a-token-0123456789")] {
        let r = scrape(server.addr, token).await;
        assert_eq!(r.status(), 401, "{token:?}");
        assert!(r.headers().get("www-authenticate").is_some());
    }
    assert_eq!(scrape(server.addr, Some(READER)).await.status(), 403);
}

#[tokio::test]
async fn without_tokens_the_metrics_are_open_on_loopback() {
    let fx = Fixture::new();
    let server = support::start_http(&fx, None, None).await;
    let r = scrape(server.addr, None).await;
    assert_eq!(r.status(), 200);
    let text = r.text().await.unwrap();
    assert_eq!(requests(&text, "context_load", "ok"), 0.0);
    // Files on disk: no pool.
    assert!(!text.contains("memloop_pg_pool"));
    let post = reqwest::Client::new()
        .post(format!("http://{}/metrics", server.addr))
        .send()
        .await
        .unwrap();
    assert_eq!(post.status(), 405);
}

#[tokio::test]
async fn on_the_team_store_the_pool_is_reported() {
    let fx = Fixture::new();
    let project = fx.project("pooled");
    let team = support::team::TestTeam::new();
    let mut config = fx.config();
    config.stores = Some(team.clone() as std::sync::Arc<dyn memloop_mcp::ProjectStores>);
    let server = support::start_http_config(config, None, None).await;
    let pool = |text: &str, state: &str| {
        value(
            text,
            &format!("memloop_pg_pool_connections{{state=\"{state}\"}}"),
        )
        .unwrap_or_else(|| panic!("no pool {state}:\n{text}"))
    };
    // Before the first request the pool is not made: empty, with its size.
    let text = scrape(server.addr, None).await.text().await.unwrap();
    let max = memloop_mcp::SERVER_POOL_SIZE as f64;
    assert_eq!(
        (
            pool(&text, "in_use"),
            pool(&text, "idle"),
            pool(&text, "max")
        ),
        (0.0, 0.0, max)
    );
    let save = call(
        1,
        "context_save",
        &s(&project),
        serde_json::json!({"entries": [{"type": "knowledge", "title": "pool", "content": SECRET_TEXT}]}),
    );
    assert!(!tool_error(post(&server.url, None, &save).await).await);
    // The answer is in: its connection is back in the pool, idle.
    let text = scrape(server.addr, None).await.text().await.unwrap();
    assert_eq!(pool(&text, "in_use"), 0.0, "{text}");
    assert!(pool(&text, "idle") >= 1.0, "{text}");
    assert_eq!(pool(&text, "max"), max);
    assert_eq!(value(&text, "memloop_pg_pool_waiting"), Some(0.0));
    assert_eq!(requests(&text, "context_save", "ok"), 1.0);
    assert!(!text.contains(SECRET_TEXT));
}
