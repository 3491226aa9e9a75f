//! The load client: many concurrent MCP clients (raw JSON-RPC over keep-alive HTTP, with or
//! without sessions) running a mix of `context_search`, `context_save`, `context_load` and
//! `context_manage` against `memloop mcp --http` (one server, or replicas behind a balancer),
//! loopback only. It prints ops/s, p50 / p99 per operation and, given the servers' pids, their CPU
//! per operation; then it reads back every acknowledged save (exit 1 when one is lost).
//!
//! A save carries an idempotency key and is retried with it (after a dropped connection, a 5xx
//! or a 429, whose `Retry-After` it honours), so it lands exactly once.
//!
//! ```text
//! cargo run --release -p memloop-cli --example mcp_load_client -- \
//!     --url http://127.0.0.1:8080/mcp --token "$TOKEN" --project /work/repo \
//!     --clients 20 --seconds 10 --mix search=4,save=1 --server-pid "$(pidof memloop)"
//! ```
#![allow(clippy::print_stdout, clippy::print_stderr)]

use clap::Parser;
use memloop_testkit::{McpCallError, McpHttp};
use serde_json::json;
use std::collections::BTreeMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
struct Args {
    /// The MCP endpoint (loopback only).
    #[arg(long, default_value = "http://127.0.0.1:8080/mcp")]
    url: String,
    /// The bearer token.
    #[arg(long)]
    token: Option<String>,
    /// A project path the clients work in (repeat for several; clients take them in turn).
    #[arg(long = "project", required = true)]
    projects: Vec<String>,
    /// Concurrent clients.
    #[arg(long, default_value_t = 20)]
    clients: usize,
    /// How long to run.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// The mix, as weights: `search=4,save=1,load=0,manage=0`.
    #[arg(long, default_value = "search=4,save=1")]
    mix: String,
    /// Protocol version the clients speak.
    #[arg(long, default_value = "2025-06-18")]
    protocol: String,
    /// A server process whose CPU to charge to the run (repeat for replicas).
    #[arg(long = "server-pid")]
    server_pids: Vec<u32>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Search,
    Save,
    Load,
    Manage,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Search => "search",
            Op::Save => "save",
            Op::Load => "load",
            Op::Manage => "manage",
        }
    }
}

fn parse_mix(mix: &str) -> Result<Vec<Op>, String> {
    let mut wheel = Vec::new();
    for part in mix.split(',').filter(|p| !p.trim().is_empty()) {
        let (name, weight) = part
            .split_once('=')
            .ok_or_else(|| format!("`{part}`: expected name=weight"))?;
        let op = match name.trim() {
            "search" => Op::Search,
            "save" => Op::Save,
            "load" => Op::Load,
            "manage" => Op::Manage,
            other => return Err(format!("unknown operation `{other}`")),
        };
        let weight: usize = weight
            .trim()
            .parse()
            .map_err(|_| format!("`{part}`: the weight is not a number"))?;
        wheel.extend(std::iter::repeat_n(op, weight));
    }
    if wheel.is_empty() {
        return Err("the mix is empty".into());
    }
    Ok(wheel)
}

/// What one client did.
#[derive(Default)]
struct Log {
    latencies: BTreeMap<Op, Vec<Duration>>,
    errors: BTreeMap<Op, usize>,
    /// Acknowledged saves: (project, marker).
    saved: Vec<(String, String)>,
    retries: usize,
    limited: usize,
}

/// Whether a failed call may be retried (the request may not have been applied, or was refused
/// for now), and how long to wait first.
fn retry_after(error: &McpCallError) -> Option<Duration> {
    match error {
        McpCallError::Transport(_) => Some(Duration::from_millis(20)),
        McpCallError::Status {
            status: 429 | 503,
            retry_after,
            ..
        } => Some(Duration::from_secs(retry_after.unwrap_or(1).max(1))),
        McpCallError::Status { status, .. } if *status >= 500 || *status == 404 => {
            Some(Duration::from_millis(20))
        }
        _ => None,
    }
}

async fn client(i: usize, args: &Args, wheel: &[Op], deadline: Instant) -> Log {
    let mut mcp = McpHttp::new(&args.url).with_protocol(&args.protocol);
    if let Some(token) = &args.token {
        mcp = mcp.with_token(token);
    }
    let project = &args.projects[i % args.projects.len()];
    let mut log = Log::default();
    let mut n = i;
    while Instant::now() < deadline {
        let op = wheel[n % wheel.len()];
        n += 1;
        let marker = format!("lc{}x{}", i, uuid::Uuid::new_v4().simple());
        let (tool, arguments) = match op {
            Op::Search => (
                "context_search",
                json!({"project_path": project, "query": "deploy pipeline release", "limit": 5}),
            ),
            Op::Load => ("context_load", json!({"project_path": project})),
            Op::Manage => (
                "context_manage",
                json!({"project_path": project, "action": "list", "target": "knowledge/"}),
            ),
            Op::Save => (
                "context_save",
                json!({"project_path": project,
                       "idempotency_key": uuid::Uuid::new_v4().to_string(),
                       "entries": [{"type": "knowledge", "title": format!("load {marker}"),
                                    "content": format!("Deploy pipeline note {marker}: releases go out on Tuesdays.")}]}),
            ),
        };
        let started = Instant::now();
        let mut attempts = 0;
        let outcome = loop {
            attempts += 1;
            match mcp.call(tool, arguments.clone()).await {
                Ok(v) => break Ok(v),
                Err(e) => match retry_after(&e) {
                    Some(wait)
                        if attempts < 20
                            && Instant::now() + wait < deadline + Duration::from_secs(30) =>
                    {
                        if matches!(e, McpCallError::Status { status: 429, .. }) {
                            log.limited += 1;
                        }
                        log.retries += 1;
                        tokio::time::sleep(wait).await;
                    }
                    _ => break Err(e),
                },
            }
        };
        match outcome {
            Ok(v) if v["is_error"] == false => {
                log.latencies.entry(op).or_default().push(started.elapsed());
                if op == Op::Save {
                    log.saved.push((project.clone(), marker));
                }
            }
            Ok(v) => {
                *log.errors.entry(op).or_default() += 1;
                eprintln!("{}: tool error {v}", op.name());
            }
            Err(e) => {
                *log.errors.entry(op).or_default() += 1;
                eprintln!("{}: {e}", op.name());
            }
        }
    }
    log
}

/// utime + stime of a process, in clock ticks (100 per second on Linux).
fn cpu_ticks(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')')? + 2..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1]
}

/// Read back every acknowledged save: a search for its marker must find it.
async fn lost(args: &Args, saved: &[(String, String)]) -> Vec<(String, String)> {
    let mut mcp = McpHttp::new(&args.url).with_protocol(&args.protocol);
    if let Some(token) = &args.token {
        mcp = mcp.with_token(token);
    }
    let mut missing = Vec::new();
    for (project, marker) in saved {
        let mut found = None;
        for _ in 0..5 {
            match mcp
                .call(
                    "context_search",
                    json!({"project_path": project, "query": marker, "limit": 5, "detail": "full"}),
                )
                .await
            {
                Ok(v) => {
                    found = Some(v.to_string().contains(marker.as_str()));
                    break;
                }
                Err(e) => {
                    eprintln!("read back: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
        if found != Some(true) {
            missing.push((project.clone(), marker.clone()));
        }
    }
    missing
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    let host = reqwest::Url::parse(&args.url)?
        .host_str()
        .map(|h| h.trim_matches(['[', ']']).to_owned())
        .unwrap_or_default();
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if !loopback {
        return Err(format!("the load client runs on loopback only, not `{host}`").into());
    }
    let wheel = parse_mix(&args.mix)?;
    let before: Vec<Option<u64>> = args.server_pids.iter().map(|&p| cpu_ticks(p)).collect();
    let started = Instant::now();
    let deadline = started + Duration::from_secs(args.seconds);
    let args = std::sync::Arc::new(args);
    let wheel = std::sync::Arc::new(wheel);
    let mut tasks = Vec::new();
    for i in 0..args.clients {
        let (args, wheel) = (args.clone(), wheel.clone());
        tasks.push(tokio::spawn(async move {
            client(i, &args, &wheel, deadline).await
        }));
    }
    let mut all = Log::default();
    for task in tasks {
        let log = task.await?;
        for (op, l) in log.latencies {
            all.latencies.entry(op).or_default().extend(l);
        }
        for (op, e) in log.errors {
            *all.errors.entry(op).or_default() += e;
        }
        all.saved.extend(log.saved);
        all.retries += log.retries;
        all.limited += log.limited;
    }
    let elapsed = started.elapsed();
    let after: Vec<Option<u64>> = args.server_pids.iter().map(|&p| cpu_ticks(p)).collect();
    let server_ticks: u64 = before
        .iter()
        .zip(&after)
        .filter_map(|(b, a)| Some(a.as_ref()?.saturating_sub(*b.as_ref()?)))
        .sum();

    let total: usize = all.latencies.values().map(Vec::len).sum();
    println!(
        "{} clients, {:.1} s, mix {}: {total} operations, {:.0} ops/s, {} retries ({} after 429)",
        args.clients,
        elapsed.as_secs_f64(),
        args.mix,
        total as f64 / elapsed.as_secs_f64(),
        all.retries,
        all.limited
    );
    println!("| operation | done | errors | ops/s | p50 | p99 |");
    println!("|---|---|---|---|---|---|");
    for (op, latencies) in &mut all.latencies {
        latencies.sort();
        println!(
            "| {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms |",
            op.name(),
            latencies.len(),
            all.errors.get(op).copied().unwrap_or(0),
            latencies.len() as f64 / elapsed.as_secs_f64(),
            percentile(latencies, 0.5).as_secs_f64() * 1e3,
            percentile(latencies, 0.99).as_secs_f64() * 1e3,
        );
    }
    if !args.server_pids.is_empty() && total > 0 {
        println!(
            "server CPU: {:.0} ms in all, {:.3} ms per operation",
            server_ticks as f64 * 10.0,
            server_ticks as f64 * 10.0 / total as f64
        );
    }
    let missing = lost(&args, &all.saved).await;
    println!(
        "read back: {} acknowledged saves, {} lost",
        all.saved.len(),
        missing.len()
    );
    for (project, marker) in &missing {
        println!("lost: {marker} in {project}");
    }
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!("{} acknowledged saves were lost", missing.len()).into())
    }
}
