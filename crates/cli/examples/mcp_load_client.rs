//! The load client: many concurrent MCP clients (raw JSON-RPC over keep-alive HTTP, with or
//! without sessions) running a mix of `context_search`, `context_save`, `context_load` and
//! `context_manage` against `memloop mcp --http` (one server, or replicas behind a balancer),
//! loopback only. It prints ops/s, p50 / p99 per operation and, given the servers' pids, their CPU
//! per operation (and PostgreSQL's, with `--postgres-cpu`), HAProxy's when one runs, and its own
//! (a client that costs more than the server measures the client); then it reads back every acknowledged
//! save (exit 1 when one is lost or found twice). With `--read-your-writes A,B` it then measures
//! how long after a save answered by server A a search through server B finds it.
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
use memloop_testkit::{
    LoadOp, LoadPlan, LoadProgress, McpHttp, percentile, process_cpu, processes_cpu, read_back,
    read_your_writes, run_load,
};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

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
    /// Stop each client after this many operations (a run of a known size, e.g. to seed a
    /// project), or at `--seconds`, whichever comes first.
    #[arg(long)]
    operations: Option<usize>,
    /// The mix, as weights: `search=4,save=1,load=0,manage=0`.
    #[arg(long, default_value = "search=4,save=1")]
    mix: String,
    /// Protocol version the clients speak.
    #[arg(long, default_value = "2025-06-18")]
    protocol: String,
    /// A server process whose CPU to charge to the run (repeat for replicas).
    #[arg(long = "server-pid")]
    server_pids: Vec<u32>,
    /// Also charge the CPU of every process named `postgres` on this machine (its backends,
    /// WAL writer and checkpointer) to the run. A backend that exits during the run (its
    /// connection was terminated) takes its CPU time with it: not counted.
    #[arg(long)]
    postgres_cpu: bool,
    /// After the run, measure read-your-writes: save through the first URL, search through the
    /// second until found (`--read-your-writes http://A/mcp,http://B/mcp`), this many times.
    #[arg(long, value_delimiter = ',')]
    read_your_writes: Vec<String>,
    /// Samples of the read-your-writes measurement.
    #[arg(long, default_value_t = 200)]
    read_your_writes_samples: usize,
}

fn loopback_only(url: &str) -> Result<(), Box<dyn std::error::Error>> {
    let host = reqwest::Url::parse(url)?
        .host_str()
        .map(|h| h.trim_matches(['[', ']']).to_owned())
        .unwrap_or_default();
    let loopback = host == "localhost" || host.parse::<IpAddr>().is_ok_and(|ip| ip.is_loopback());
    if loopback {
        Ok(())
    } else {
        Err(format!("the load client runs on loopback only, not `{host}`").into())
    }
}

fn client(args: &Args, url: &str) -> McpHttp {
    let mcp = McpHttp::new(url).with_protocol(&args.protocol);
    match &args.token {
        Some(token) => mcp.with_token(token),
        None => mcp,
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = Args::parse();
    // The run's warnings (a tool error, a call that got no answer) on stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_max_level(tracing::Level::WARN)
        .init();
    loopback_only(&args.url)?;
    if !matches!(args.read_your_writes.len(), 0 | 2) {
        return Err("--read-your-writes takes two URLs: WRITE,READ".into());
    }
    for url in &args.read_your_writes {
        loopback_only(url)?;
    }
    let plan = LoadPlan {
        url: args.url.clone(),
        token: args.token.clone(),
        protocol: args.protocol.clone(),
        projects: args.projects.clone(),
        clients: args.clients,
        mix: LoadOp::parse_mix(&args.mix)?,
        duration: Duration::from_secs(args.seconds),
        operations_per_client: args.operations,
    };
    let servers_before: Vec<_> = args.server_pids.iter().map(|&p| process_cpu(p)).collect();
    let postgres_before = processes_cpu("postgres");
    let haproxy_before = processes_cpu("haproxy");
    let own_before = process_cpu(std::process::id());
    let mut report = run_load(plan, Arc::new(LoadProgress::default())).await?;
    let servers_after: Vec<_> = args.server_pids.iter().map(|&p| process_cpu(p)).collect();
    let postgres = processes_cpu("postgres").saturating_sub(postgres_before);
    let haproxy = processes_cpu("haproxy").saturating_sub(haproxy_before);
    let own = process_cpu(std::process::id())
        .zip(own_before)
        .map(|(after, before)| after.saturating_sub(before));
    let server: Duration = servers_before
        .iter()
        .zip(&servers_after)
        .filter_map(|(b, a)| Some(a.as_ref()?.saturating_sub(*b.as_ref()?)))
        .sum();

    let total = report.operations();
    let elapsed = report.elapsed.as_secs_f64();
    println!(
        "{} clients, {elapsed:.1} s, mix {}: {total} operations, {:.0} ops/s, {} retries ({} after 429), {} saves replayed from their key",
        args.clients,
        args.mix,
        total as f64 / elapsed,
        report.retries,
        report.limited,
        report.replayed
    );
    println!("| operation | done | errors | ops/s | p50 | p99 |");
    println!("|---|---|---|---|---|---|");
    let mut all = Vec::new();
    for (op, latencies) in &mut report.latencies {
        latencies.sort();
        all.extend_from_slice(latencies);
        println!(
            "| {} | {} | {} | {:.0} | {:.2} ms | {:.2} ms |",
            op.name(),
            latencies.len(),
            report.errors.get(op).copied().unwrap_or(0),
            latencies.len() as f64 / elapsed,
            ms(percentile(latencies, 0.5)),
            ms(percentile(latencies, 0.99)),
        );
    }
    all.sort();
    println!(
        "| all | {} | {} | {:.0} | {:.2} ms | {:.2} ms |",
        all.len(),
        report.errors.values().sum::<usize>(),
        all.len() as f64 / elapsed,
        ms(percentile(&all, 0.5)),
        ms(percentile(&all, 0.99)),
    );
    if total > 0 && !args.server_pids.is_empty() {
        println!(
            "server CPU: {:.0} ms in all, {:.3} ms per operation",
            ms(server),
            ms(server) / total as f64
        );
    }
    if total > 0 && args.postgres_cpu {
        println!(
            "PostgreSQL CPU: {:.0} ms in all, {:.3} ms per operation",
            ms(postgres),
            ms(postgres) / total as f64
        );
    }
    if total > 0 && !haproxy.is_zero() {
        println!(
            "HAProxy CPU: {:.0} ms in all, {:.3} ms per operation",
            ms(haproxy),
            ms(haproxy) / total as f64
        );
    }
    if let Some(own) = own.filter(|_| total > 0) {
        println!(
            "load client CPU: {:.0} ms in all, {:.3} ms per operation",
            ms(own),
            ms(own) / total as f64
        );
    }
    let back = read_back(&mut client(&args, &args.url), &report.saved).await;
    println!(
        "read back: {} acknowledged saves, {} lost, {} found more than once",
        report.saved.len(),
        back.lost.len(),
        back.duplicated.len()
    );
    for entry in &back.lost {
        println!("lost: {} in {}", entry.marker, entry.project);
    }
    for entry in &back.duplicated {
        println!("more than once: {} in {}", entry.marker, entry.project);
    }
    if let [write, read] = args.read_your_writes.as_slice() {
        let mut delays = read_your_writes(
            &mut client(&args, write),
            &mut client(&args, read),
            &args.projects[0],
            args.read_your_writes_samples,
            Duration::from_secs(10),
        )
        .await?;
        delays.sort();
        println!(
            "read-your-writes ({} samples, saved through {write}, searched through {read}): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms",
            delays.len(),
            ms(percentile(&delays, 0.5)),
            ms(percentile(&delays, 0.99)),
            ms(delays.last().copied().unwrap_or_default()),
        );
    }
    if back.lost.is_empty() && back.duplicated.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} acknowledged saves lost, {} landed more than once",
            back.lost.len(),
            back.duplicated.len()
        )
        .into())
    }
}
