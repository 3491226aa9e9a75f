//! Memory bounded per replica (issue #54 item 3): one `memloop mcp --http` server on PostgreSQL
//! under `--cache-mib`, and a client that touches every one of N projects × 50 memories.
//!
//! ```text
//! cargo build --release -p memloop-cli --no-default-features --features postgres
//! cargo run --release -p memloop-cli --no-default-features --features postgres \
//!     --example cache_budget -- target/release/memloop 10000 64
//! ```
//!
//! Arguments: the server binary, the number of projects (default 10,000), the budgets in MiB
//! (default 64; several, comma-separated, run one server after another on the same rows). PostgreSQL at 127.0.0.1:5432 (database `test`, trust auth): the memories are
//! generated in a schema of their own (dropped afterwards), one dir per project under a temp
//! root. Then the server starts, and one client (raw JSON-RPC over one keep-alive HTTP
//! connection) runs one `context_search` in every project in turn (a cold project: the server
//! opens its store and builds its header cache and BM25 postings), sampling the server's
//! `VmRSS` (`/proc/<pid>/status`) every 100 projects, then searches again the projects used
//! last (still in the cache: warm). Printed: RSS before the first project and at its peak
//! against the budget, cold-search p50 / p99, warm-search p50, how many projects were evicted
//! (the server's debug log) and their mean estimated size, and projects per 100 MiB.
#![allow(clippy::print_stdout, clippy::unwrap_used, clippy::expect_used)]

use memloop_pg::{PgConfig, PgMemoryStore, ProjectIdentity, canonical_text, sha256_hex};
use memloop_store::{MemoryDoc, MemoryType};
use memloop_testkit::Lcg;
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};

const PG: &str = "host=127.0.0.1 port=5432 user=root dbname=test";
const MEMORIES: usize = 50;
/// Projects whose rows go in one INSERT.
const BATCH: usize = 20;

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1000.0)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

async fn admin() -> tokio_postgres::Client {
    let (c, conn) = tokio_postgres::connect(PG, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c
}

/// The schema, dropped when the run ends (or fails).
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

/// The project dir `i` under `root`.
fn project_dir(root: &Path, i: usize) -> PathBuf {
    root.join(format!("p{i:05}"))
}

/// Insert `MEMORIES` generated memories for each project of `projects` (ids), one statement.
async fn insert(db: &tokio_postgres::Client, projects: &[(usize, String)]) {
    let mut cols: [Vec<String>; 7] = Default::default();
    for (i, id) in projects {
        let mut rng = Lcg(*i as u64 * 7919 + 1);
        for j in 0..MEMORIES {
            let (w1, w2) = (rng.word(), rng.word());
            let rel = format!("project/{w1}_{w2}_{j}.md");
            let second = 30 + rng.next() % 30;
            let doc = MemoryDoc::new(
                format!("{w1} {w2} note {j}"),
                format!("what project {i} learned about {}", rng.words(6)),
                MemoryType::Project,
                format!("{}.\n\n{}.\n", rng.words(30), rng.words(second)),
            );
            let content = canonical_text(&doc.render(), &rel);
            let stored = MemoryDoc::parse(&content, &format!("{w1}_{w2}_{j}")).unwrap();
            let sha = sha256_hex(&content);
            for (col, v) in cols.iter_mut().zip([
                id.clone(),
                rel,
                stored.name,
                stored.description,
                stored.body,
                content,
                sha,
            ]) {
                col.push(v);
            }
        }
    }
    let [p, r, n, d, b, c, s] = &cols;
    db.execute(
        "INSERT INTO memloop_memories (project_id, rel_path, name, description, memory_type,
             body, content, sha256, version, updated_by, write_id, source)
         SELECT p, r, n, d, 'project', b, c, s, 1, 'cache_budget', gen_random_uuid(), c
         FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                     $7::text[]) AS t(p, r, n, d, b, c, s)",
        &[p, r, n, d, b, c, s],
    )
    .await
    .unwrap();
}

/// The server's resident memory, in bytes (`VmRSS`).
fn rss(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// What the server's debug log says it evicted: the estimated bytes of each project.
type Evicted = Arc<Mutex<Vec<u64>>>;

/// Start the server and wait for its "serving" line; its log is read for evictions.
async fn start(
    bin: &str,
    url: &str,
    root: &Path,
    home: &Path,
    mib: usize,
) -> (Child, String, Evicted) {
    let mut child = Command::new(bin)
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("MEMLOOP_HOME", home.join("base"))
        .env("MEMLOOP_DATABASE_URL", url)
        .env("MEMLOOP_LOG", "warn,memloop_mcp::projects=debug")
        // To compare allocators' behaviour: glibc's arena count, when the run sets it.
        .envs(std::env::var("MALLOC_ARENA_MAX").map(|v| ("MALLOC_ARENA_MAX", v)))
        .arg("--project")
        .arg(root)
        .arg("mcp")
        .arg("--root")
        .arg(root)
        .arg("--http")
        .arg("127.0.0.1:0")
        .arg("--cache-mib")
        .arg(mib.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let addr = loop {
        let line = lines
            .next_line()
            .await
            .unwrap()
            .expect("server exited before serving");
        if let Some(rest) = line.strip_prefix("memloop: serving MCP on http://") {
            break rest.to_owned();
        }
    };
    let evicted = Evicted::default();
    let seen = evicted.clone();
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            if !line.contains("project cache evicted") {
                continue;
            }
            let bytes = line
                .split("bytes=")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|b| b.parse().ok());
            if let Some(b) = bytes {
                seen.lock().unwrap().push(b);
            }
        }
    });
    (child, format!("http://{addr}"), evicted)
}

/// A minimal MCP client over Streamable HTTP (JSON-RPC over POST; answers as JSON or SSE).
struct McpHttp {
    http: reqwest::Client,
    url: String,
    session: Option<String>,
    next_id: u64,
}

impl McpHttp {
    async fn post(&mut self, body: &Value) -> (u16, Option<String>, String) {
        let mut req = self
            .http
            .post(&self.url)
            .header("Accept", "application/json, text/event-stream")
            .json(body);
        if let Some(s) = &self.session {
            req = req.header("Mcp-Session-Id", s);
        }
        let r = req.send().await.unwrap();
        let status = r.status().as_u16();
        let session = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        (status, session, r.text().await.unwrap())
    }

    /// The JSON-RPC response with `id` in a JSON or SSE body.
    fn response(text: &str, id: u64) -> Option<Value> {
        if text.trim_start().starts_with('{') {
            return serde_json::from_str(text)
                .ok()
                .filter(|v: &Value| v["id"] == id);
        }
        text.lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
            .find(|v| v["id"] == id)
    }

    async fn connect(url: &str) -> Self {
        let mut c = Self {
            http: reqwest::Client::new(),
            url: format!("{url}/mcp"),
            session: None,
            next_id: 2,
        };
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "cache_budget", "version": "0"}}});
        let (status, session, text) = c.post(&init).await;
        assert!(
            status == 200 && Self::response(&text, 1).is_some(),
            "initialize: {status} {text}"
        );
        c.session = session;
        let (status, _, text) = c
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert!((200..300).contains(&status), "initialized: {status} {text}");
        c
    }

    /// One `context_search` in `project`: how long it took; panics unless it found memories.
    async fn search(&mut self, project: &Path, query: &str) -> Duration {
        let id = self.next_id;
        self.next_id += 1;
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
            "name": "context_search",
            "arguments": {"project_path": project.to_string_lossy(), "query": query,
                          "limit": 5}}});
        let t = Instant::now();
        let (status, _, text) = self.post(&body).await;
        let took = t.elapsed();
        let v = Self::response(&text, id).unwrap_or_else(|| panic!("{status} {text}"));
        let out = &v["result"]["structuredContent"];
        let found = out["results"].as_array().map_or(0, Vec::len);
        assert!(
            v["result"]["isError"] != true && found > 0,
            "{}: {v}",
            project.display()
        );
        took
    }
}

#[tokio::main]
async fn main() {
    let mut args = std::env::args().skip(1);
    let bin = args
        .next()
        .expect("usage: cache_budget <memloop binary> [projects] [cache MiB, ...]");
    let n: usize = args.next().map_or(10_000, |a| a.parse().unwrap());
    let budgets: Vec<usize> = args.next().map_or(vec![64], |a| {
        a.split(',').map(|b| b.parse().unwrap()).collect()
    });

    let schema = Schema(format!("memloop_cachebench_{}", std::process::id()));
    admin()
        .await
        .batch_execute(&format!("CREATE SCHEMA {}", schema.0))
        .await
        .unwrap();
    let url = format!("{PG} options='-c search_path={}'", schema.0);
    let tmp = tempfile::tempdir().unwrap();
    let base = std::fs::canonicalize(tmp.path()).unwrap();
    let (root, home) = (base.join("root"), base.join("home"));
    std::fs::create_dir_all(&home).unwrap();
    for i in 0..n {
        std::fs::create_dir_all(project_dir(&root, i)).unwrap();
    }

    // The tables (a store's first open migrates), then the rows, in batches.
    let first = project_dir(&root, 0);
    let id0 = ProjectIdentity::of(&first).id;
    PgMemoryStore::open(PgConfig::new(url.clone(), id0.clone()))
        .await
        .unwrap();
    // A dir outside any git checkout is named by its path; the same rule for every dir (one
    // `git config` per dir would cost more than the rows).
    assert_eq!(id0, format!("dir:{}", first.display()));
    let (db, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let t = Instant::now();
    let ids: Vec<(usize, String)> = (0..n)
        .map(|i| (i, format!("dir:{}", project_dir(&root, i).display())))
        .collect();
    for (k, chunk) in ids.chunks(BATCH).enumerate() {
        insert(&db, chunk).await;
        if (k + 1) % 50 == 0 {
            println!(
                "generated {} projects in {:.0} s",
                (k + 1) * BATCH,
                t.elapsed().as_secs_f64()
            );
        }
    }
    db.batch_execute("ANALYZE memloop_memories").await.unwrap();
    println!(
        "generated {n} projects x {MEMORIES} memories in {:.0} s",
        t.elapsed().as_secs_f64()
    );

    for budget_mib in budgets {
        serve(&bin, &url, &root, &home, n, budget_mib).await;
    }
}

/// Start a server under `--cache-mib budget_mib`, touch every project, print the figures.
async fn serve(bin: &str, url: &str, root: &Path, home: &Path, n: usize, budget_mib: usize) {
    let (server, url, evicted) = start(bin, url, root, home, budget_mib).await;
    let pid = server.id().unwrap();
    let mut client = McpHttp::connect(&url).await;
    let before = rss(pid);
    let budget = budget_mib as u64 * 1024 * 1024;

    // Every project once, cold: its store opened, its caches built by the search.
    let (mut cold, mut peak) = (Vec::with_capacity(n), before);
    let t = Instant::now();
    for i in 0..n {
        let mut rng = Lcg(i as u64 * 7919 + 1);
        let query = format!("{} {}", rng.word(), rng.word());
        cold.push(client.search(&project_dir(root, i), &query).await);
        if i % 100 == 99 || i + 1 == n {
            peak = peak.max(rss(pid));
        }
        if i % 1000 == 999 {
            println!(
                "{} projects touched in {:.0} s, RSS {:.1} MiB",
                i + 1,
                t.elapsed().as_secs_f64(),
                mib(rss(pid))
            );
        }
    }
    let after_cold = rss(pid);
    let evicted: Vec<u64> = evicted.lock().unwrap().clone();
    let kept = n - evicted.len().min(n);

    // The projects used last are still cached: search them again, warm.
    let warm_set = (kept / 2).clamp(1, 500).min(n);
    let mut warm = Vec::with_capacity(warm_set * 2);
    for _ in 0..2 {
        for i in n - warm_set..n {
            let mut rng = Lcg(i as u64 * 7919 + 1);
            let query = format!("{} {}", rng.word(), rng.word());
            warm.push(client.search(&project_dir(root, i), &query).await);
        }
    }
    peak = peak.max(rss(pid));
    cold.sort();
    warm.sort();

    println!("\nprojects: {n} x {MEMORIES} memories; budget --cache-mib {budget_mib}");
    println!(
        "server RSS: {:.1} MiB before the first project, {:.1} MiB after the cold pass, \
         peak {:.1} MiB; peak - before = {:.1} MiB (budget {budget_mib} MiB)",
        mib(before),
        mib(after_cold),
        mib(peak),
        mib(peak.saturating_sub(before))
    );
    println!(
        "cold search (first in a project): p50 {}, p99 {}; warm search: p50 {} ({} searches)",
        ms(memloop_testkit::percentile(&cold, 0.5)),
        ms(memloop_testkit::percentile(&cold, 0.99)),
        ms(memloop_testkit::percentile(&warm, 0.5)),
        warm.len()
    );
    if evicted.is_empty() {
        println!("no project evicted: the budget holds all {n}");
    } else {
        let mean = evicted.iter().sum::<u64>() as f64 / evicted.len() as f64;
        println!(
            "evicted {} projects, kept {kept}; estimate per project {:.1} KiB: {:.0} projects \
             per 100 MiB by the estimate, {:.0} by RSS (kept / (peak - before))",
            evicted.len(),
            mean / 1024.0,
            100.0 * 1024.0 * 1024.0 / mean,
            kept as f64 * 100.0 / mib(peak.saturating_sub(before)).max(f64::MIN_POSITIVE)
        );
    }
    if peak.saturating_sub(before) > budget {
        println!("RSS grew past the budget");
    }
    drop(server);
}
