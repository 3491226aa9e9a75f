//! The server's metrics registry: tool calls by tool and outcome with their latency, refusals
//! by kind, and (sampled when read) the project cache and the store's connection pool. Recording
//! is a few relaxed atomic adds, no lock; reading takes a [`Snapshot`], which both exporters
//! read: the Prometheus text of `GET /metrics` ([`Snapshot::prometheus`]) and, with the `otel`
//! feature, OTLP observable instruments ([`observe`]). Labels come from fixed sets (the tools'
//! names, [`Status`], [`Refusal`]): never a project, a path, a token or a client's text.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (seconds) of the request-duration histogram's buckets (`+Inf` follows).
const BUCKETS: [f64; 12] = [
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0,
];

/// How a tool call ended, as its span's `error.type` says it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Status {
    /// Answered.
    Ok,
    /// Answered with a tool error (a refusal: a bad argument, a rule, access, a conflict).
    ToolError,
    /// Failed at the protocol level (JSON-RPC error).
    ProtocolError,
}

impl Status {
    const ALL: [Self; 3] = [Self::Ok, Self::ToolError, Self::ProtocolError];

    /// The label value (`ok`, and for the others the span's `error.type`).
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::ToolError => "tool_error",
            Self::ProtocolError => "protocol_error",
        }
    }
}

/// Why the HTTP transport refused a request before any tool ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refusal {
    /// No valid bearer token (HTTP 401).
    Unauthorized,
    /// The token's access does not allow the call (HTTP 403).
    Forbidden,
    /// Over the token's rate or requests in flight (HTTP 429).
    TokenLimit,
    /// Over the MCP session caps (HTTP 429).
    SessionCap,
}

impl Refusal {
    const ALL: [Self; 4] = [
        Self::Unauthorized,
        Self::Forbidden,
        Self::TokenLimit,
        Self::SessionCap,
    ];

    fn label(self) -> &'static str {
        match self {
            Self::Unauthorized => "unauthorized",
            Self::Forbidden => "forbidden",
            Self::TokenLimit => "token_limit",
            Self::SessionCap => "session_cap",
        }
    }
}

/// One tool's calls with one status: the histogram's buckets (not cumulative; the last is
/// `+Inf`) and the sum of durations in nanoseconds. The count is the buckets' sum.
#[derive(Default)]
struct Series {
    buckets: [AtomicU64; BUCKETS.len() + 1],
    sum_nanos: AtomicU64,
}

/// The counters; one per server (its clones share it).
pub(crate) struct Metrics {
    tools: Vec<(&'static str, [Series; Status::ALL.len()])>,
    refusals: [AtomicU64; Refusal::ALL.len()],
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Metrics {
    /// Counters for the tools named (the server's fixed list).
    pub(crate) fn new(tools: &[&'static str]) -> Self {
        Self {
            tools: tools.iter().map(|t| (*t, Default::default())).collect(),
            refusals: Default::default(),
        }
    }

    /// Count one call of `tool` that ended with `status` after `elapsed`. A name not in the
    /// list is not counted (every routed tool is in it).
    pub(crate) fn tool_call(&self, tool: &str, status: Status, elapsed: std::time::Duration) {
        let Some((_, by_status)) = self.tools.iter().find(|(t, _)| *t == tool) else {
            return;
        };
        let series = &by_status[status as usize];
        let secs = elapsed.as_secs_f64();
        let bucket = BUCKETS
            .iter()
            .position(|le| secs <= *le)
            .unwrap_or(BUCKETS.len());
        series.buckets[bucket].fetch_add(1, Ordering::Relaxed);
        let nanos = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        series.sum_nanos.fetch_add(nanos, Ordering::Relaxed);
    }

    /// Count one refusal.
    pub(crate) fn refused(&self, kind: Refusal) {
        self.refusals[kind as usize].fetch_add(1, Ordering::Relaxed);
    }

    /// What the counters hold now, with the sampled `cache` and `pool`.
    pub(crate) fn snapshot(&self, cache: CacheUse, pool: Option<PoolUse>) -> Snapshot {
        let mut calls = Vec::new();
        for (tool, by_status) in &self.tools {
            for status in Status::ALL {
                let series = &by_status[status as usize];
                let buckets: Vec<u64> = series
                    .buckets
                    .iter()
                    .map(|b| b.load(Ordering::Relaxed))
                    .collect();
                calls.push(Calls {
                    tool,
                    status,
                    buckets,
                    sum_secs: series.sum_nanos.load(Ordering::Relaxed) as f64 / 1e9,
                });
            }
        }
        Snapshot {
            calls,
            refusals: Refusal::ALL
                .iter()
                .map(|k| (*k, self.refusals[*k as usize].load(Ordering::Relaxed)))
                .collect(),
            cache,
            pool,
        }
    }
}

/// The project cache's figures, kept by the cache as it changes (a store per settle, an add
/// per eviction) and read without its lock.
#[derive(Debug)]
pub(crate) struct CacheGauges {
    bytes: AtomicU64,
    budget: AtomicU64,
    projects: AtomicU64,
    evictions: AtomicU64,
}

impl CacheGauges {
    /// A cache of `budget` bytes, empty.
    pub(crate) fn new(budget: usize) -> Self {
        Self {
            bytes: AtomicU64::new(0),
            budget: AtomicU64::new(budget as u64),
            projects: AtomicU64::new(0),
            evictions: AtomicU64::new(0),
        }
    }

    /// The cache holds `projects` projects of `bytes` (estimated) now.
    pub(crate) fn held(&self, bytes: usize, projects: usize) {
        self.bytes.store(bytes as u64, Ordering::Relaxed);
        self.projects.store(projects as u64, Ordering::Relaxed);
    }

    /// One project was dropped to keep the cache within its budget.
    pub(crate) fn evicted(&self) {
        self.evictions.fetch_add(1, Ordering::Relaxed);
    }

    /// The figures now.
    pub(crate) fn read(&self) -> CacheUse {
        CacheUse {
            bytes: self.bytes.load(Ordering::Relaxed),
            budget: self.budget.load(Ordering::Relaxed),
            projects: self.projects.load(Ordering::Relaxed),
            evictions: self.evictions.load(Ordering::Relaxed),
        }
    }
}

/// The project cache, as sampled: its estimated bytes, budget, open projects and evictions.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct CacheUse {
    pub(crate) bytes: u64,
    pub(crate) budget: u64,
    pub(crate) projects: u64,
    pub(crate) evictions: u64,
}

/// A store's connection pool, as sampled ([`ProjectStores::pool_use`](crate::ProjectStores::pool_use)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolUse {
    /// Connections lent to a request now.
    pub in_use: u64,
    /// Connections open and idle in the pool.
    pub idle: u64,
    /// Most connections the pool opens.
    pub max: u64,
    /// Requests waiting for a connection now.
    pub waiting: u64,
}

/// One tool's calls with one status, read.
#[derive(Debug, Clone)]
pub(crate) struct Calls {
    pub(crate) tool: &'static str,
    pub(crate) status: Status,
    /// Per bucket (not cumulative), the last `+Inf`.
    pub(crate) buckets: Vec<u64>,
    pub(crate) sum_secs: f64,
}

impl Calls {
    pub(crate) fn count(&self) -> u64 {
        self.buckets.iter().sum()
    }
}

/// The metrics at one moment.
#[derive(Debug, Clone)]
pub(crate) struct Snapshot {
    pub(crate) calls: Vec<Calls>,
    pub(crate) refusals: Vec<(Refusal, u64)>,
    pub(crate) cache: CacheUse,
    pub(crate) pool: Option<PoolUse>,
}

/// A `# HELP` and `# TYPE` header.
fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

impl Snapshot {
    /// The Prometheus text exposition (format 0.0.4).
    pub(crate) fn prometheus(&self) -> String {
        let mut out = String::new();
        header(
            &mut out,
            "memloop_mcp_requests_total",
            "counter",
            "MCP tool calls by tool and outcome (ok, tool_error, protocol_error).",
        );
        for c in &self.calls {
            let _ = writeln!(
                out,
                "memloop_mcp_requests_total{{tool=\"{}\",status=\"{}\"}} {}",
                c.tool,
                c.status.label(),
                c.count()
            );
        }
        let name = "memloop_mcp_request_duration_seconds";
        header(
            &mut out,
            name,
            "histogram",
            "MCP tool call duration in seconds, by tool and outcome.",
        );
        for c in &self.calls {
            let labels = format!("tool=\"{}\",status=\"{}\"", c.tool, c.status.label());
            let mut cumulative = 0;
            for (i, n) in c.buckets.iter().enumerate() {
                cumulative += n;
                let le = BUCKETS.get(i).map_or("+Inf".to_owned(), |b| b.to_string());
                let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{le}\"}} {cumulative}");
            }
            let _ = writeln!(out, "{name}_sum{{{labels}}} {}", c.sum_secs);
            let _ = writeln!(out, "{name}_count{{{labels}}} {cumulative}");
        }
        header(
            &mut out,
            "memloop_mcp_refusals_total",
            "counter",
            "HTTP requests refused before any tool ran: unauthorized (401), forbidden (403), \
             token_limit and session_cap (429).",
        );
        for (kind, n) in &self.refusals {
            let _ = writeln!(
                out,
                "memloop_mcp_refusals_total{{kind=\"{}\"}} {n}",
                kind.label()
            );
        }
        let gauges = [
            (
                "memloop_cache_bytes",
                "gauge",
                "Estimated bytes held by the per-project caches (headers, BM25 postings, vectors).",
                self.cache.bytes,
            ),
            (
                "memloop_cache_budget_bytes",
                "gauge",
                "The per-project caches' memory budget in bytes (--cache-mib).",
                self.cache.budget,
            ),
            (
                "memloop_cache_projects",
                "gauge",
                "Projects open in the cache.",
                self.cache.projects,
            ),
            (
                "memloop_cache_evictions_total",
                "counter",
                "Projects dropped from the cache to keep it within its budget.",
                self.cache.evictions,
            ),
        ];
        for (name, kind, help, value) in gauges {
            header(&mut out, name, kind, help);
            let _ = writeln!(out, "{name} {value}");
        }
        if let Some(pool) = self.pool {
            header(
                &mut out,
                "memloop_pg_pool_connections",
                "gauge",
                "PostgreSQL pool connections: in_use, idle, and max (the pool's size).",
            );
            for (state, n) in [
                ("in_use", pool.in_use),
                ("idle", pool.idle),
                ("max", pool.max),
            ] {
                let _ = writeln!(out, "memloop_pg_pool_connections{{state=\"{state}\"}} {n}");
            }
            header(
                &mut out,
                "memloop_pg_pool_waiting",
                "gauge",
                "Requests waiting for a PostgreSQL pool connection now.",
            );
            let _ = writeln!(out, "memloop_pg_pool_waiting {}", pool.waiting);
        }
        out
    }
}

/// Where a [`Snapshot`] comes from when an exporter asks (`None`: the server is gone).
#[cfg(feature = "otel")]
pub(crate) type Source = std::sync::Arc<dyn Fn() -> Option<Snapshot> + Send + Sync>;

/// Export the registry through `meter` (the OTLP export's): observable instruments whose
/// callbacks read a [`Snapshot`] of `source` at each collection, so the OTLP figures are the
/// `/metrics` figures, counted once. OTLP has no observable histogram: the request duration
/// goes as its cumulative buckets (`memloop.mcp.request.duration.bucket`, attribute `le`) and
/// its sum (`memloop.mcp.request.duration.sum`, seconds); `memloop.mcp.requests` is its count.
#[cfg(feature = "otel")]
pub(crate) fn observe(meter: &opentelemetry::metrics::Meter, source: &Source) {
    use opentelemetry::KeyValue;
    let call_labels = |c: &Calls| {
        [
            KeyValue::new("tool", c.tool),
            KeyValue::new("status", c.status.label()),
        ]
    };
    let s = source.clone();
    meter
        .u64_observable_counter("memloop.mcp.requests")
        .with_description("MCP tool calls by tool and outcome (ok, tool_error, protocol_error).")
        .with_callback(move |o| {
            for c in s().map(|s| s.calls).unwrap_or_default() {
                o.observe(c.count(), &call_labels(&c));
            }
        })
        .build();
    let s = source.clone();
    meter
        .f64_observable_counter("memloop.mcp.request.duration.sum")
        .with_unit("s")
        .with_description("Total duration of MCP tool calls, by tool and outcome.")
        .with_callback(move |o| {
            for c in s().map(|s| s.calls).unwrap_or_default() {
                o.observe(c.sum_secs, &call_labels(&c));
            }
        })
        .build();
    let s = source.clone();
    meter
        .u64_observable_counter("memloop.mcp.request.duration.bucket")
        .with_description(
            "MCP tool calls that took at most `le` seconds (cumulative buckets), by tool and outcome.",
        )
        .with_callback(move |o| {
            for c in s().map(|s| s.calls).unwrap_or_default() {
                let mut cumulative = 0;
                for (i, n) in c.buckets.iter().enumerate() {
                    cumulative += n;
                    let le = BUCKETS.get(i).map_or("+Inf".to_owned(), |b| b.to_string());
                    let [tool, status] = call_labels(&c);
                    o.observe(cumulative, &[tool, status, KeyValue::new("le", le)]);
                }
            }
        })
        .build();
    let s = source.clone();
    meter
        .u64_observable_counter("memloop.mcp.refusals")
        .with_description("HTTP requests refused before any tool ran, by kind.")
        .with_callback(move |o| {
            for (kind, n) in s().map(|s| s.refusals).unwrap_or_default() {
                o.observe(n, &[KeyValue::new("kind", kind.label())]);
            }
        })
        .build();
    let s = source.clone();
    meter
        .u64_observable_gauge("memloop.cache.bytes")
        .with_unit("By")
        .with_description("Estimated bytes held by the per-project caches.")
        .with_callback(move |o| {
            if let Some(snap) = s() {
                o.observe(snap.cache.bytes, &[]);
            }
        })
        .build();
    let s = source.clone();
    meter
        .u64_observable_counter("memloop.cache.evictions")
        .with_description("Projects dropped from the cache to keep it within its budget.")
        .with_callback(move |o| {
            if let Some(snap) = s() {
                o.observe(snap.cache.evictions, &[]);
            }
        })
        .build();
    let s = source.clone();
    meter
        .u64_observable_gauge("memloop.pg.pool.connections")
        .with_description("PostgreSQL pool connections: in_use, idle, max.")
        .with_callback(move |o| {
            if let Some(pool) = s().and_then(|s| s.pool) {
                for (state, n) in [
                    ("in_use", pool.in_use),
                    ("idle", pool.idle),
                    ("max", pool.max),
                ] {
                    o.observe(n, &[KeyValue::new("state", state)]);
                }
            }
        })
        .build();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    #[test]
    fn calls_land_in_their_bucket_and_the_text_is_cumulative() {
        let m = Metrics::new(&["context_load", "context_save"]);
        m.tool_call("context_load", Status::Ok, Duration::from_micros(500));
        m.tool_call("context_load", Status::Ok, Duration::from_millis(20));
        m.tool_call("context_load", Status::Ok, Duration::from_secs(60));
        m.tool_call("context_save", Status::ToolError, Duration::from_millis(2));
        m.tool_call("not_a_tool", Status::Ok, Duration::from_millis(2));
        m.refused(Refusal::Unauthorized);
        let text = m.snapshot(CacheUse::default(), None).prometheus();
        for line in [
            "memloop_mcp_requests_total{tool=\"context_load\",status=\"ok\"} 3",
            "memloop_mcp_requests_total{tool=\"context_save\",status=\"tool_error\"} 1",
            "memloop_mcp_requests_total{tool=\"context_save\",status=\"ok\"} 0",
            "memloop_mcp_request_duration_seconds_bucket{tool=\"context_load\",status=\"ok\",le=\"0.001\"} 1",
            "memloop_mcp_request_duration_seconds_bucket{tool=\"context_load\",status=\"ok\",le=\"0.025\"} 2",
            "memloop_mcp_request_duration_seconds_bucket{tool=\"context_load\",status=\"ok\",le=\"10\"} 2",
            "memloop_mcp_request_duration_seconds_bucket{tool=\"context_load\",status=\"ok\",le=\"+Inf\"} 3",
            "memloop_mcp_request_duration_seconds_count{tool=\"context_load\",status=\"ok\"} 3",
            "memloop_mcp_refusals_total{kind=\"unauthorized\"} 1",
            "memloop_mcp_refusals_total{kind=\"forbidden\"} 0",
        ] {
            assert!(text.lines().any(|l| l == line), "{line}\n{text}");
        }
        assert!(!text.contains("not_a_tool"));
        assert!(!text.contains("memloop_pg_pool"));
    }
}
