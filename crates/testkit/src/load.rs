//! A load run against an MCP server (one server, or replicas behind a balancer): concurrent
//! [`McpHttp`] clients running a mix of `context_search`, `context_save`, `context_load` and
//! `context_manage`, each save carrying an idempotency key and retried with it; then every
//! acknowledged save read back. The load client example and the replicated-deployment tests
//! run this one implementation.

use crate::mcp_client::{McpCallError, McpHttp};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// One kind of operation of a load run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LoadOp {
    /// `context_search` for a fixed query.
    Search,
    /// `context_save` of one new entry, with an idempotency key.
    Save,
    /// `context_load` of the project.
    Load,
    /// `context_manage` listing the `knowledge/` entries.
    Manage,
}

impl LoadOp {
    /// The name used in a mix and in reports: `search`, `save`, `load`, `manage`.
    pub fn name(self) -> &'static str {
        match self {
            Self::Search => "search",
            Self::Save => "save",
            Self::Load => "load",
            Self::Manage => "manage",
        }
    }

    /// A mix written as weights, `search=4,save=1,load=0,manage=0`, as the wheel of operations
    /// each client takes in turn.
    ///
    /// ```
    /// use memloop_testkit::LoadOp;
    /// let wheel = LoadOp::parse_mix("search=4,save=1").unwrap();
    /// assert_eq!(wheel.iter().filter(|op| **op == LoadOp::Search).count(), 4);
    /// assert!(LoadOp::parse_mix("search=x").is_err());
    /// ```
    pub fn parse_mix(mix: &str) -> Result<Vec<LoadOp>, String> {
        let mut wheel = Vec::new();
        for part in mix.split(',').filter(|p| !p.trim().is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| format!("`{part}`: expected name=weight"))?;
            let op = match name.trim() {
                "search" => Self::Search,
                "save" => Self::Save,
                "load" => Self::Load,
                "manage" => Self::Manage,
                other => return Err(format!("unknown operation `{other}`")),
            };
            let weight: usize = weight
                .trim()
                .parse()
                .map_err(|_| format!("`{part}`: the weight is not a whole number"))?;
            wheel.extend(std::iter::repeat_n(op, weight));
        }
        if wheel.is_empty() {
            return Err("the mix has no operation with a weight above 0".into());
        }
        Ok(wheel)
    }
}

/// What a load run does.
#[derive(Clone, Debug)]
pub struct LoadPlan {
    /// The MCP endpoint, e.g. `http://127.0.0.1:8080/mcp`.
    pub url: String,
    /// The bearer token, if the server wants one.
    pub token: Option<String>,
    /// The protocol version the clients speak (see [`McpHttp::with_protocol`]).
    pub protocol: String,
    /// The project paths; client `i` works in project `i % len`.
    pub projects: Vec<String>,
    /// Concurrent clients.
    pub clients: usize,
    /// The wheel of operations ([`LoadOp::parse_mix`]).
    pub mix: Vec<LoadOp>,
    /// How long the clients start new operations.
    pub duration: Duration,
    /// At most this many operations per client, when set (a run of a known size).
    pub operations_per_client: Option<usize>,
}

/// What a running load has done so far, shared with whoever waits on it (a test that kills a
/// replica once enough saves were acknowledged).
#[derive(Debug, Default)]
pub struct LoadProgress {
    saves: AtomicUsize,
    changed: Notify,
}

impl LoadProgress {
    /// Saves acknowledged so far.
    pub fn saves(&self) -> usize {
        self.saves.load(Ordering::SeqCst)
    }

    /// Wait until at least `n` saves were acknowledged.
    pub async fn saves_reach(&self, n: usize) {
        loop {
            let changed = self.changed.notified();
            if self.saves() >= n {
                return;
            }
            changed.await;
        }
    }

    fn saved(&self) {
        self.saves.fetch_add(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }
}

/// One acknowledged save: where, and the marker its title and content carry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SavedEntry {
    /// The project path.
    pub project: String,
    /// A unique word in the entry's title and content.
    pub marker: String,
}

/// What a load run saw.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// From the first operation to the last answer.
    pub elapsed: Duration,
    /// Latency of every completed operation (retries included in its time), by kind.
    pub latencies: BTreeMap<LoadOp, Vec<Duration>>,
    /// Operations that failed (a tool error, or no answer after the retries), by kind.
    pub errors: BTreeMap<LoadOp, usize>,
    /// Every acknowledged save.
    pub saved: Vec<SavedEntry>,
    /// Calls sent again (a dropped connection, a 5xx, a 404 for an unknown session, a 429).
    pub retries: usize,
    /// Of those, the ones after a 429.
    pub limited: usize,
    /// Saves answered with the outcome of an earlier attempt with the same idempotency key
    /// (`"replayed": true`): an attempt whose answer was lost had landed.
    pub replayed: usize,
}

impl LoadReport {
    /// Completed operations.
    pub fn operations(&self) -> usize {
        self.latencies.values().map(Vec::len).sum()
    }

    fn absorb(&mut self, other: LoadReport) {
        for (op, l) in other.latencies {
            self.latencies.entry(op).or_default().extend(l);
        }
        for (op, e) in other.errors {
            *self.errors.entry(op).or_default() += e;
        }
        self.saved.extend(other.saved);
        self.retries += other.retries;
        self.limited += other.limited;
        self.replayed += other.replayed;
    }
}

/// Whether a failed call may be sent again (it may not have been applied, or was refused for
/// now), and after how long. A save is sent again with the same idempotency key, so it lands
/// once whichever replica answers.
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

/// A client of the plan's server.
pub(crate) fn client_of(url: &str, token: Option<&str>, protocol: &str) -> McpHttp {
    let mcp = McpHttp::new(url).with_protocol(protocol);
    match token {
        Some(token) => mcp.with_token(token),
        None => mcp,
    }
}

/// Call `tool`, sending it again after a failure [`retry_after`] allows (at most 20 times, and
/// not past `give_up`).
async fn call_retrying(
    mcp: &mut McpHttp,
    tool: &str,
    arguments: &Value,
    give_up: Instant,
    log: &mut LoadReport,
) -> Result<Value, McpCallError> {
    let mut attempts = 0;
    loop {
        attempts += 1;
        match mcp.call(tool, arguments.clone()).await {
            Ok(v) => return Ok(v),
            Err(e) => match retry_after(&e) {
                Some(wait) if attempts < 20 && Instant::now() + wait < give_up => {
                    if matches!(e, McpCallError::Status { status: 429, .. }) {
                        log.limited += 1;
                    }
                    log.retries += 1;
                    tokio::time::sleep(wait).await;
                }
                _ => return Err(e),
            },
        }
    }
}

async fn client(
    i: usize,
    plan: &LoadPlan,
    progress: &LoadProgress,
    deadline: Instant,
) -> LoadReport {
    let mut mcp = client_of(&plan.url, plan.token.as_deref(), &plan.protocol);
    let project = &plan.projects[i % plan.projects.len()];
    let mut log = LoadReport::default();
    let give_up = deadline + Duration::from_secs(30);
    let mut n = i;
    let mut done = 0;
    while Instant::now() < deadline && plan.operations_per_client.is_none_or(|max| done < max) {
        done += 1;
        let op = plan.mix[n % plan.mix.len()];
        n += 1;
        let marker = format!("lc{i}x{}", uuid::Uuid::new_v4().simple());
        let (tool, arguments) = match op {
            LoadOp::Search => (
                "context_search",
                json!({"project_path": project, "query": "deploy pipeline release", "limit": 5}),
            ),
            LoadOp::Load => ("context_load", json!({"project_path": project})),
            LoadOp::Manage => (
                "context_manage",
                json!({"project_path": project, "action": "list", "target": "knowledge/"}),
            ),
            LoadOp::Save => (
                "context_save",
                json!({"project_path": project,
                       "idempotency_key": uuid::Uuid::new_v4().to_string(),
                       "entries": [{"type": "knowledge", "title": format!("load {marker}"),
                                    "content": format!("Deploy pipeline note {marker}: releases go out on Tuesdays.")}]}),
            ),
        };
        let started = Instant::now();
        match call_retrying(&mut mcp, tool, &arguments, give_up, &mut log).await {
            Ok(v) if v["is_error"] == false => {
                log.latencies.entry(op).or_default().push(started.elapsed());
                if op == LoadOp::Save {
                    if v["replayed"] == true {
                        log.replayed += 1;
                    }
                    log.saved.push(SavedEntry {
                        project: project.clone(),
                        marker,
                    });
                    progress.saved();
                }
            }
            Ok(v) => {
                *log.errors.entry(op).or_default() += 1;
                tracing::warn!(op = op.name(), answer = %v, "load: tool error");
            }
            Err(e) => {
                *log.errors.entry(op).or_default() += 1;
                tracing::warn!(op = op.name(), error = %e, "load: no answer");
            }
        }
    }
    log
}

/// Run `plan`: its clients concurrently until the duration ends (or each has done its
/// operations), reporting acknowledged saves to `progress` as they come. An error when the plan
/// names no project or no operation.
pub async fn run_load(plan: LoadPlan, progress: Arc<LoadProgress>) -> Result<LoadReport, String> {
    if plan.projects.is_empty() {
        return Err("the load plan names no project".into());
    }
    if plan.mix.is_empty() {
        return Err("the load plan's mix has no operation".into());
    }
    let started = Instant::now();
    let deadline = started + plan.duration;
    let plan = Arc::new(plan);
    let mut tasks = Vec::new();
    for i in 0..plan.clients {
        let (plan, progress) = (plan.clone(), progress.clone());
        tasks.push(tokio::spawn(async move {
            client(i, &plan, &progress, deadline).await
        }));
    }
    let mut all = LoadReport::default();
    for task in tasks {
        match task.await {
            Ok(log) => all.absorb(log),
            Err(e) => tracing::error!(error = %e, "load: a client task failed"),
        }
    }
    all.elapsed = started.elapsed();
    Ok(all)
}

/// What reading back the acknowledged saves found.
#[derive(Debug, Default)]
pub struct ReadBack {
    /// Acknowledged saves no search finds.
    pub lost: Vec<SavedEntry>,
    /// Acknowledged saves found in more than one memory (a retry that landed twice).
    pub duplicated: Vec<SavedEntry>,
}

/// Search for every acknowledged save's marker through `mcp`: each must be found in exactly one
/// memory.
pub async fn read_back(mcp: &mut McpHttp, saved: &[SavedEntry]) -> ReadBack {
    let mut out = ReadBack::default();
    let give_up = Instant::now() + Duration::from_secs(60);
    for entry in saved {
        let args = json!({"project_path": entry.project, "query": entry.marker,
                          "limit": 10, "detail": "full"});
        let found = match call_retrying(
            mcp,
            "context_search",
            &args,
            give_up,
            &mut LoadReport::default(),
        )
        .await
        {
            Ok(v) => v["results"]
                .as_array()
                .map(|results| {
                    results
                        .iter()
                        .filter(|r| r.to_string().contains(entry.marker.as_str()))
                        .count()
                })
                .unwrap_or(0),
            Err(e) => {
                tracing::warn!(error = %e, "read back: no answer");
                0
            }
        };
        match found {
            0 => out.lost.push(entry.clone()),
            1 => {}
            _ => out.duplicated.push(entry.clone()),
        }
    }
    out
}

/// Read-your-writes across two servers: `samples` times, save a new entry through `write`,
/// then search for it through `read` until it is found. The delays from the save's answer to
/// the first search that finds it; an error when one is not found within `give_up`.
pub async fn read_your_writes(
    write: &mut McpHttp,
    read: &mut McpHttp,
    project: &str,
    samples: usize,
    give_up: Duration,
) -> Result<Vec<Duration>, String> {
    let mut delays = Vec::with_capacity(samples);
    for _ in 0..samples {
        let marker = format!("ryw{}", uuid::Uuid::new_v4().simple());
        let saved = write
            .call(
                "context_save",
                json!({"project_path": project,
                       "entries": [{"type": "knowledge", "title": format!("note {marker}"),
                                    "content": format!("Read your writes: {marker}.")}]}),
            )
            .await
            .map_err(|e| format!("save: {e}"))?;
        if saved["is_error"] != false {
            return Err(format!("save refused: {saved}"));
        }
        let acknowledged = Instant::now();
        loop {
            let found = read
                .call(
                    "context_search",
                    json!({"project_path": project, "query": marker, "limit": 3}),
                )
                .await
                .map_err(|e| format!("search: {e}"))?;
            if found.to_string().contains(marker.as_str()) {
                delays.push(acknowledged.elapsed());
                break;
            }
            if acknowledged.elapsed() > give_up {
                return Err(format!(
                    "{marker} not found through the other server after {give_up:?}"
                ));
            }
            tokio::task::yield_now().await;
        }
    }
    Ok(delays)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(projects: Vec<String>, mix: &str) -> LoadPlan {
        LoadPlan {
            url: "http://127.0.0.1:9/mcp".into(),
            token: None,
            protocol: "2025-06-18".into(),
            projects,
            clients: 2,
            mix: LoadOp::parse_mix(mix).unwrap_or_default(),
            duration: Duration::from_secs(1),
            operations_per_client: Some(1),
        }
    }

    #[tokio::test]
    async fn a_plan_without_a_project_or_an_operation_is_an_error_not_a_panic() {
        let progress = Arc::new(LoadProgress::default());
        let none = run_load(plan(Vec::new(), "search=1"), progress.clone()).await;
        assert!(none.unwrap_err().contains("no project"));
        let idle = run_load(plan(vec!["/p".into()], "search=0"), progress).await;
        assert!(idle.unwrap_err().contains("no operation"));
    }

    #[test]
    fn a_mix_is_its_weights_in_turn() {
        let wheel = LoadOp::parse_mix("search=2, save=1,load=0").unwrap();
        assert_eq!(wheel, [LoadOp::Search, LoadOp::Search, LoadOp::Save]);
        assert!(LoadOp::parse_mix("fly=1").unwrap_err().contains("unknown"));
        assert!(LoadOp::parse_mix("").is_err());
    }
}
