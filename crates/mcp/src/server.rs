//! [`MemoryServer`]: the MCP handler (tools + the index resource) and [`serve_stdio`].

use crate::access::{Access, Denied, Effect};
use crate::answer::Reply;
use crate::batch::{Caller, SaveKey, check_key};
use crate::mapping::Scope;
use crate::metrics::Status;
use crate::ops::{self, ManageAction, Refusal, SaveEntry};
use crate::projects::{McpConfig, NotServed, OpenFailed, Project, Projects};
use crate::tiers::Detail;
use rmcp::{
    ErrorData, RoleServer, ServerHandler, ServiceExt,
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{
        CallToolResult, ContentBlock, Implementation, ListResourcesResult, PaginatedRequestParams,
        ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
        ResourceContents, ServerCapabilities, ServerConfig,
    },
    schemars,
    service::RequestContext,
    tool, tool_handler, tool_router,
};
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;

/// `dir` is a directory whose entries can be listed; when it does not exist, its nearest
/// existing parent is (the first write creates the rest).
async fn readable_dir_or_parent(dir: &std::path::Path) -> Result<(), String> {
    let mut at = dir;
    loop {
        match tokio::fs::metadata(at).await {
            Ok(meta) if meta.is_dir() => {
                return tokio::fs::read_dir(at)
                    .await
                    .map(drop)
                    .map_err(|e| format!("{}: {e}", at.display()));
            }
            Ok(_) => return Err(format!("{} is not a directory", at.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => match at.parent() {
                Some(parent) => at = parent,
                None => return Err(format!("{}: {e}", at.display())),
            },
            Err(e) => return Err(format!("{}: {e}", at.display())),
        }
    }
}

/// URI scheme of the index resources: `memloop://project/<id>/MEMORY.md`.
pub const RESOURCE_PREFIX: &str = "memloop://project/";

/// `context_load` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct LoadParams {
    /// Absolute path of the project directory (its repository root or any directory in it).
    pub project_path: String,
    /// `summary` (default): sessions and todos as their overview; `full`: their whole text.
    #[serde(default)]
    pub detail: Detail,
}

fn default_limit() -> usize {
    5
}

/// `context_search` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SearchParams {
    /// Absolute path of the project directory.
    pub project_path: String,
    /// What to look for, in plain words.
    pub query: String,
    /// Restrict to one kind of entry (default `all`).
    #[serde(default)]
    pub scope: Scope,
    /// Most results to return (default 5, at most 50).
    #[serde(default = "default_limit")]
    pub limit: usize,
    /// `summary` (default): each result's overview; `full`: its whole text.
    #[serde(default)]
    pub detail: Detail,
}

/// `context_save` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SaveParams {
    /// Absolute path of the project directory.
    pub project_path: String,
    /// The entries to save (1 to 100), all or none: when one is refused, nothing is written
    /// and the answer says why for each.
    pub entries: Vec<SaveEntry>,
    /// Optional key naming this batch (1 to 128 visible ASCII characters, e.g. a UUID): a
    /// retry with the same key (after a lost answer) writes nothing again and gets the first
    /// answer back (`replayed: true`); the same key with other entries is refused
    /// (`code: idempotency_key_reused`). Keys are kept 24 hours, per token and project.
    #[serde(default)]
    pub idempotency_key: Option<String>,
}

/// `context_manage` arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct ManageParams {
    /// Absolute path of the project directory.
    pub project_path: String,
    /// What to do.
    pub action: ManageAction,
    /// For `delete` / `update`: the memory's path as listed (e.g. `todos/fix-ci.md`); for
    /// `list`: an optional path prefix (e.g. `decisions/`).
    #[serde(default)]
    pub target: Option<String>,
    /// For `update`: the new body.
    #[serde(default)]
    pub content: Option<String>,
    /// For `update` (optional, recommended): the memory's `version` as a previous `context_load`,
    /// `context_search` or `context_save` answer gave it (64 hex digits, the SHA-256 of its
    /// stored text). When the memory has changed since, nothing is written and the tool error
    /// carries `code: "version_conflict"` and the `current_version`.
    #[serde(default)]
    pub expected_version: Option<String>,
    /// For `list`: the `nextCursor` of the previous page, to get the next one (pass it back as
    /// it was given, with the same `target`). A list answers at most 100 memories a page, by
    /// path; `nextCursor` is there when more follow.
    #[serde(default)]
    pub cursor: Option<String>,
    /// For `init_project`: write the usage block into the project's CLAUDE.md (between
    /// `<!-- memloop:begin ... -->` and `<!-- memloop:end -->` markers; default true).
    #[serde(default)]
    pub claude_md: Option<bool>,
}

/// What a tool call says about itself, declared with each tool's arguments: the project it
/// names and what it does there. Authorization reads this, never the tool's name.
struct Declared<'a> {
    project_path: &'a str,
    effect: Effect,
    /// It writes the global memory (which every project sees).
    writes_global: bool,
}

/// A tool's arguments, declaring the project and effect of a call.
trait ToolRequest: Send + Sync {
    fn declared(&self) -> Declared<'_>;
}

/// Reads a tool's arguments as the tool declares them (`None`: arguments the tool would
/// reject; its call answers those).
type Declare = fn(&Value) -> Option<Box<dyn ToolRequest>>;

fn declare<T: ToolRequest + serde::de::DeserializeOwned + 'static>(
    args: &Value,
) -> Option<Box<dyn ToolRequest>> {
    serde_json::from_value::<T>(args.clone())
        .ok()
        .map(|t| Box::new(t) as Box<dyn ToolRequest>)
}

/// call answers those), `Err` for a tool with no declaration.
fn declared_call(message: &Value) -> Result<Option<Box<dyn ToolRequest>>, Denied> {
    let name = message["params"]["name"].as_str().unwrap_or_default();
    match DECLARATIONS.iter().find(|(n, _)| *n == name) {
        Some((_, declare)) => Ok(declare(&message["params"]["arguments"])),
        None => Err(Denied(
            "this tool declares no effect, so no token may call it".into(),
        )),
    }
}

/// The [`Access`] a request carries: the one its transport put into the HTTP request's
/// extensions ([`serve_http`](crate::serve_http) always does), else full access (stdio).
fn access_of(ctx: &RequestContext<RoleServer>) -> Access {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Access>())
        .cloned()
        .unwrap_or_else(Access::full)
}

/// Who a request is, for idempotency keys: the [`Caller`] its transport put into the HTTP
/// request's extensions (a digest of its bearer token), else `local` (stdio, no tokens).
fn caller_of(ctx: &RequestContext<RoleServer>) -> String {
    ctx.extensions
        .get::<http::request::Parts>()
        .and_then(|parts| parts.extensions.get::<Caller>())
        .map_or_else(|| "local".to_owned(), |c| c.0.clone())
}

/// Most bytes of a refusal's reason: reasons quote what the client sent (a target, a title),
/// and an answer must not grow with the input.
const MAX_REASON_BYTES: usize = 2_000;

/// `reason`, cut at [`MAX_REASON_BYTES`] (on a character boundary) with a mark.
fn bounded_reason(mut reason: String) -> String {
    if reason.len() > MAX_REASON_BYTES {
        let cut = memloop_text::truncate_utf8(&reason, MAX_REASON_BYTES).len();
        reason.truncate(cut);
        reason.push_str(" … (cut)");
    }
    reason
}

/// The MCP server over memloop memory dirs. Clone it freely: clones share the open stores.
#[derive(Clone)]
pub struct MemoryServer {
    projects: Arc<Projects>,
    tool_router: ToolRouter<Self>,
    metrics: Arc<crate::metrics::Metrics>,
}

impl std::fmt::Debug for MemoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemoryServer")
            .field("roots", &self.projects.roots())
            .finish_non_exhaustive()
    }
}

/// The MIME type of the index resources, the same in `resources/list` and `resources/read`.
pub const INDEX_MIME: &str = "text/markdown";

impl MemoryServer {
    /// The project a tool call may act on, resolved, or why not: the one place a call's
    /// [`Access`] is checked, on the key its memory is stored under, for every tool. It has no
    /// effect on memory (the HTTP transport runs it before dispatching, for the status code).
    async fn authorize(
        &self,
        access: &Access,
        call: &dyn ToolRequest,
    ) -> Result<Project, NotServed> {
        let d = call.declared();
        let project = self
            .projects
            .resolve(d.project_path, access, d.effect)
            .await?;
        if d.writes_global {
            access
                .permit_global(Effect::Write)
                .map_err(NotServed::Denied)?;
        }
        Ok(project)
    }

    /// [`Self::authorize`] as a tool runs it: a call that writes first records what the
    /// first write to a project records ([`Projects::before_write`]).
    async fn admit(
        &self,
        ctx: &RequestContext<RoleServer>,
        call: &dyn ToolRequest,
    ) -> Result<Project, NotServed> {
        let access = access_of(ctx);
        let project = self.authorize(&access, call).await?;
        if call.declared().effect == Effect::Write {
            self.projects.before_write(&project, &access).await;
        }
        Ok(project)
    }

    /// Whether `access` is refused any tool call in a JSON-RPC `body` (one message or a
    /// batch, as parsed by the transport): the HTTP transport answers 403 for it before the
    /// call is dispatched. The tools check the same again ([`Self::authorize`]) when they run.
    pub(crate) async fn check_request(&self, access: &Access, body: &Value) -> Result<(), Denied> {
        if *access == Access::full() {
            return Ok(());
        }
        let messages = match body {
            Value::Array(v) => v.as_slice(),
            one => std::slice::from_ref(one),
        };
        for message in messages.iter().filter(|m| m["method"] == "tools/call") {
            let Some(call) = declared_call(message)? else {
                continue;
            };
            if let Err(NotServed::Denied(denied)) = self.authorize(access, call.as_ref()).await {
                return Err(denied);
            }
        }
        Ok(())
    }

    /// The tool result: the answer redacted and fitted to the size cap, or the refusal as a
    /// tool error.
    fn answer(&self, r: Result<impl Into<Reply>, Refusal>) -> Result<CallToolResult, ErrorData> {
        let max = self.projects.limits().max_answer_bytes;
        // As `CallToolResult::structured` / `structured_error` build it (the JSON as text
        // content too), with the text the size check serialized instead of a second pass.
        let (v, failed): (Reply, bool) = match r {
            Ok(v) => (v.into(), false),
            Err(Refusal { reason, details }) => {
                let reason = bounded_reason(reason);
                let mut v = json!({ "refused": true, "reason": reason });
                if let Value::Object(map) = &mut v {
                    map.extend(details);
                }
                (v.into(), true)
            }
        };
        let (v, text) = crate::answer::finish(v, max);
        let content = vec![ContentBlock::text(text)];
        let mut result = if failed {
            CallToolResult::error(content)
        } else {
            CallToolResult::success(content)
        };
        result.structured_content = Some(v);
        Ok(result)
    }
}

impl MemoryServer {
    /// A server for `config`. With summaries on, it starts the background summariser and
    /// resumes the summaries left pending in the projects under its roots and in the global
    /// memory (others resume when a client first names them).
    pub fn new(config: McpConfig) -> Self {
        let projects = Arc::new(Projects::new(config));
        if let Some(scan) = projects.summariser().map(|s| s.scanning()) {
            let weak = Arc::downgrade(&projects);
            tokio::spawn(async move {
                if let Some(p) = weak.upgrade() {
                    p.resume_pending().await;
                }
                drop(scan);
            });
        }
        let names: Vec<&'static str> = DECLARATIONS.iter().map(|(n, _)| *n).collect();
        Self {
            projects,
            tool_router: Self::tool_router(),
            metrics: Arc::new(crate::metrics::Metrics::new(&names)),
        }
    }

    /// The server's metrics registry (the HTTP transport counts its refusals there).
    pub(crate) fn metrics(&self) -> &crate::metrics::Metrics {
        &self.metrics
    }

    /// Where the OTLP export reads the metrics: this server's snapshot while it lives.
    #[cfg(feature = "otel")]
    pub(crate) fn metrics_source(&self) -> crate::metrics::Source {
        let (projects, metrics) = (
            Arc::downgrade(&self.projects),
            Arc::downgrade(&self.metrics),
        );
        Arc::new(move || {
            let (projects, metrics) = (projects.upgrade()?, metrics.upgrade()?);
            let pool = projects.config().stores.as_ref().and_then(|s| s.pool_use());
            Some(metrics.snapshot(projects.cache_use(), pool))
        })
    }

    /// The metrics now: the counters, the project cache and the store's pool sampled.
    pub(crate) fn metrics_snapshot(&self) -> crate::metrics::Snapshot {
        let pool = self
            .projects
            .config()
            .stores
            .as_ref()
            .and_then(|s| s.pool_use());
        self.metrics.snapshot(self.projects.cache_use(), pool)
    }

    /// The names of the tools this server has (from its tool router: the one list).
    pub(crate) fn tool_names(&self) -> Vec<String> {
        self.tool_router
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect()
    }

    /// Whether the server can answer requests now (`GET /health` asks it): its
    /// [`ProjectStores`](crate::ProjectStores) answer ([`ready`](crate::ProjectStores::ready):
    /// a `SELECT 1` on PostgreSQL), or without them the memory dirs' home is a readable
    /// directory (the `--memory-dir`, else `MEMLOOP_HOME` or `~/.memloop`; one that does not
    /// exist yet is created by the first save, so its nearest existing parent must be one).
    /// The error says what is not ready without naming a URL, host or path (the log has the
    /// cause).
    pub async fn check_ready(&self) -> Result<(), McpServeError> {
        let config = self.projects.config();
        match &config.stores {
            Some(stores) => stores.ready().await.map_err(|e| {
                tracing::warn!(store = %stores.describe(), error = %e, "the store does not answer");
                McpServeError(format!("the {} store does not answer", stores.kind()))
            }),
            None => {
                let home = match &config.memory_dir {
                    Some(dir) => Ok(dir.clone()),
                    None => {
                        let project = self.projects.roots().first().cloned().unwrap_or_default();
                        let resolver = if config.claude {
                            memloop_paths::MemoryDirResolver::claude_code(project)
                        } else {
                            memloop_paths::MemoryDirResolver::new(project)
                        };
                        resolver.env(config.env.clone()).base_dir()
                    }
                };
                let checked = match home {
                    Ok(home) => readable_dir_or_parent(&home).await,
                    Err(e) => Err(e.to_string()),
                };
                checked.map_err(|e| {
                    tracing::warn!(error = %e, "the memory dirs are not readable");
                    McpServeError("the memory directory is not readable".into())
                })
            }
        }
    }

    /// Wait until no background summary is queued or being written (at once when summaries
    /// are off). A host calls it before shutting down to let pending summaries finish; what is
    /// still pending when the server stops resumes when a server opens that memory again.
    pub async fn summaries_settled(&self) {
        if let Some(s) = self.projects.summariser() {
            s.settled().await;
        }
    }
}

/// Declares every tool of the server, each once: its name (the handler method's identifier,
/// which is also the name the router serves, the span's `gen_ai.tool.name` and the key of
/// [`DECLARATIONS`]), its arguments (their type is the input schema), its description, its
/// authorization rule (the [`Declared`] project, effect and global write of a call, read by the
/// authorization pre-check and by the call itself) and the method that runs it. It emits the
/// whole `#[tool_router]` impl (rmcp's attribute does not see `#[tool]` methods a macro inside
/// the impl would generate), the [`ToolRequest`] impls and [`DECLARATIONS`], so a tool cannot
/// be routed, traced and authorized under different names.
macro_rules! tools {
    ($(
        $name:ident {
            params: $params:ty,
            description: $description:literal,
            declared: |$p:ident| $declared:expr,
            run: $run:ident,
        }
    )*) => {
        $(
            impl ToolRequest for $params {
                fn declared(&self) -> Declared<'_> {
                    let $p = self;
                    $declared
                }
            }
        )*

        /// Every tool's declaration, by name: the one table the transport's authorization
        /// pre-check reads. A tool missing here is refused by the pre-check (never let through
        /// unchecked); `tools!` writes it from the same declarations as the router.
        const DECLARATIONS: &[(&str, Declare)] = &[$((stringify!($name), declare::<$params>)),*];

        #[tool_router]
        impl MemoryServer {
            $(
                #[tool(description = $description)]
                async fn $name(
                    &self,
                    Parameters(p): Parameters<$params>,
                    ctx: RequestContext<RoleServer>,
                ) -> Result<CallToolResult, ErrorData> {
                    self.traced(stringify!($name), &ctx, async {
                        let project = match self.admit(&ctx, &p).await {
                            Ok(project) => project,
                            Err(e) => return self.answer(Err::<Value, _>(e.into())),
                        };
                        self.answer(self.$run(p, project, &ctx).await)
                    })
                    .await
                }
            )*
        }
    };
}

tools! {
    context_load {
        params: LoadParams,
        description: "Load a project's memory at the start of a session: whether the project is \
        known, when the last session was, the memory index (MEMORY.md, capped at 200 lines / \
        25 KB), the most recent session summaries and open todos as overviews (detail: full \
        for their whole text), and active decisions as one-line abstracts. Call this first in \
        every session.",
        declared: |p| Declared {
            project_path: &p.project_path,
            effect: Effect::Read,
            writes_global: false,
        },
        run: run_load,
    }

    context_search {
        params: SearchParams,
        description: "Search a project's memory (BM25 over titles, descriptions and bodies). \
        Returns the best matches with their overview as content (detail: full for the whole \
        text) and a relevance score. Use a scope \
        (sessions, decisions, changes, knowledge) to narrow it. If ranking is unavailable the \
        newest memories in scope are listed instead (mode: listing).",
        declared: |p| Declared {
            project_path: &p.project_path,
            effect: Effect::Read,
            writes_global: false,
        },
        run: run_search,
    }

    context_save {
        params: SaveParams,
        description: "Save entries to a project's memory in one batch. Types: session_summary \
        (what happened this session), decision (what was decided and why), change (what \
        changed), knowledge (durable facts, pointers), todo (open work). Decisions, knowledge \
        and todos with an existing title are updated (give expected_version, the `version` you \
        read, to refuse the update if someone changed it since). The batch is saved whole or \
        not at all: if any entry is refused (e.g. it looked like a credential: never save \
        secrets), nothing is written and each entry's reason is given. Pass an \
        idempotency_key (e.g. a UUID) to retry safely: a retry with the same key returns the \
        first answer instead of saving twice.",
        declared: |p| Declared {
            project_path: &p.project_path,
            effect: Effect::Write,
            writes_global: p.entries.iter().any(|e| e.global),
        },
        run: run_save,
    }

    context_manage {
        params: ManageParams,
        description: "Manage a project's memory: list (optionally by path prefix in target; \
        in pages of at most 100 memories by path: pass the answer's nextCursor as cursor for \
        the next page), delete target, update target with new content (its description \
        follows the new first line), or init_project to create the memory directory \
        (MEMORY.md is written with the first saved entry). Targets are paths as returned by \
        list/search (e.g. todos/fix-ci.md). Give update the entry's `version` from \
        context_load/context_search as expected_version: if someone changed it since, the \
        update is refused with the current version (re-read, merge, retry). Without it, the \
        entry is updated as it is now.",
        declared: |p| {
            let effect = p.action.effect();
            Declared {
                project_path: &p.project_path,
                effect,
                writes_global: effect == Effect::Write
                    && ops::global_target(p.target.as_deref()).is_some(),
            }
        },
        run: run_manage,
    }
}

/// The tools' bodies, each run by its `tools!` declaration once the call is admitted on
/// `project`.
impl MemoryServer {
    async fn run_load(
        &self,
        p: LoadParams,
        project: Project,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, Refusal> {
        ops::load(&self.projects, project, p.detail).await
    }

    async fn run_search(
        &self,
        p: SearchParams,
        project: Project,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, Refusal> {
        ops::search(
            &self.projects,
            project,
            &p.query,
            p.scope,
            p.limit,
            p.detail,
        )
        .await
    }

    async fn run_save(
        &self,
        p: SaveParams,
        project: Project,
        ctx: &RequestContext<RoleServer>,
    ) -> Result<Value, Refusal> {
        let key = p
            .idempotency_key
            .as_deref()
            .map(check_key)
            .transpose()
            .map_err(Refusal::new)?
            .map(|key| SaveKey {
                caller: caller_of(ctx),
                key: key.to_owned(),
                request_sha256: crate::batch::sha256_hex(
                    serde_json::to_string(&p.entries)
                        .unwrap_or_default()
                        .as_bytes(),
                ),
            });
        let limits = self.projects.limits();
        crate::save::save(&self.projects, project, &p.entries, key, limits).await
    }

    async fn run_manage(
        &self,
        p: ManageParams,
        project: Project,
        _ctx: &RequestContext<RoleServer>,
    ) -> Result<Reply, Refusal> {
        ops::manage(
            &self.projects,
            project,
            ops::ManageRequest {
                action: p.action,
                target: p.target.as_deref(),
                content: p.content.as_deref(),
                expected_version: p.expected_version.as_deref(),
                cursor: p.cursor.as_deref(),
            },
            p.claude_md.unwrap_or(true) && self.projects.claude_md(),
        )
        .await
    }
}

impl MemoryServer {
    /// Run one tool call inside its span: `tools/call {tool}` (kind server) with the MCP and
    /// GenAI attributes (`mcp.method.name`, `gen_ai.operation.name` = `execute_tool`,
    /// `gen_ai.tool.name`, `jsonrpc.request.id`), and `error.type` when the call is refused or
    /// fails. Never the arguments or the answer (they hold memory text).
    async fn traced(
        &self,
        tool: &'static str,
        ctx: &RequestContext<RoleServer>,
        call: impl std::future::Future<Output = Result<CallToolResult, ErrorData>>,
    ) -> Result<CallToolResult, ErrorData> {
        // Over HTTP the call runs on a task of its own: its parent is the request's span
        // (crate::trace); over stdio, whatever span is current.
        let parent =
            crate::trace::parent_of(&ctx.extensions).unwrap_or_else(tracing::Span::current);
        let span = tracing::info_span!(
            parent: &parent,
            "tools/call",
            otel.name = %format!("tools/call {tool}"),
            otel.kind = "server",
            otel.status_code = tracing::field::Empty,
            mcp.method.name = "tools/call",
            gen_ai.operation.name = "execute_tool",
            gen_ai.tool.name = tool,
            jsonrpc.request.id = ?ctx.id,
            error.type = tracing::field::Empty,
        );
        let started = std::time::Instant::now();
        let result = tracing::Instrument::instrument(call, span.clone()).await;
        let status = match &result {
            Ok(answer) if answer.is_error == Some(true) => Status::ToolError,
            Ok(_) => Status::Ok,
            Err(_) => Status::ProtocolError,
        };
        self.metrics.tool_call(tool, status, started.elapsed());
        if status != Status::Ok {
            span.record("error.type", status.label());
            span.record("otel.status_code", "ERROR");
        }
        result
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for MemoryServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(Implementation::new("memloop", env!("CARGO_PKG_VERSION")))
        .with_instructions(
            "Project memory. Call context_load with the absolute project path at the start of a \
             session, context_search before answering questions about past work, and \
             context_save at the end of a task (session_summary, decision, change, knowledge, \
             todo). Never save credentials.",
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let access = access_of(&context);
        let resources = self
            .projects
            .listed(&access)
            .await
            .into_iter()
            .filter(|p| p.known() && access.permit(&p.key, Effect::Read).is_ok())
            .map(|p| {
                Resource::new(
                    format!("{RESOURCE_PREFIX}{}/MEMORY.md", p.id),
                    format!("memory index of {}", p.path.display()),
                )
                .with_description(if p.reveal {
                    format!("MEMORY.md of project {} ({})", p.id, p.memory.dir.display())
                } else {
                    format!("MEMORY.md of project {}", p.id)
                })
                .with_mime_type(INDEX_MIME)
            })
            .collect();
        Ok(ListResourcesResult::with_all_items(resources))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let access = access_of(&context);
        let uri = request.uri;
        let id = uri
            .strip_prefix(RESOURCE_PREFIX)
            .and_then(|rest| rest.strip_suffix("/MEMORY.md"));
        let project = match id {
            Some(id) => self
                .projects
                .listed(&access)
                .await
                .into_iter()
                // A project outside the request's access is not found, as one that does
                // not exist: its existence is not disclosed either.
                .find(|p| p.id == id && access.permit(&p.key, Effect::Read).is_ok()),
            None => None,
        };
        let Some(project) = project else {
            return Err(ErrorData::resource_not_found(
                format!("no memory index at {}", crate::logs::client_text(&uri)),
                None,
            ));
        };
        // Why the index is unavailable goes to the log; the client reads it only when the
        // server reveals its store (the error names files, hosts, URLs).
        let unavailable = |e: &dyn std::fmt::Display| {
            tracing::warn!(project = %project.path.display(), error = %e, "memory index unavailable");
            if project.reveal {
                format!("(memory index unavailable: {e})")
            } else {
                "(memory index unavailable; the server's log says why)".to_owned()
            }
        };
        let text = match self.projects.open_read(&project).await {
            Ok(Some(open)) => match open.store.load_index().await {
                Ok(index) => index.content,
                Err(e) => unavailable(&e),
            },
            Ok(None) => String::new(),
            // Claimed by another project since it was listed: not found, as any index
            // outside the request's access.
            Err(OpenFailed::NotServed(_)) => {
                return Err(ErrorData::resource_not_found(
                    format!("no memory index at {}", crate::logs::client_text(&uri)),
                    None,
                ));
            }
            Err(OpenFailed::Store(e)) => unavailable(&e),
        };
        // As every tool answer: credentials redacted, control characters escaped.
        let (text, _) = memloop_secrets::redact_secrets(&text);
        let text = memloop_store::printable(&text).into_owned();
        Ok(ReadResourceResult::new(vec![
            ResourceContents::text(text, uri).with_mime_type(INDEX_MIME),
        ])
        .into())
    }
}

/// Serve `config` over stdin/stdout until the client disconnects. Where they are pipes or
/// sockets (as MCP clients spawn servers) the runtime polls them; otherwise each read and write
/// runs on a blocking thread.
pub async fn serve_stdio(config: McpConfig) -> Result<(), McpServeError> {
    let service = MemoryServer::new(config)
        .serve(crate::stdio::streams())
        .await
        .map_err(|e| McpServeError(e.to_string()))?;
    service
        .waiting()
        .await
        .map_err(|e| McpServeError(e.to_string()))?;
    Ok(())
}

/// The server could not start or stopped abnormally.
#[derive(Debug, thiserror::Error)]
#[error("MCP server: {0}")]
pub struct McpServeError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_tool_of_the_router_declares_its_effect_and_only_those() {
        let mut routed: Vec<String> = MemoryServer::tool_router()
            .list_all()
            .into_iter()
            .map(|t| t.name.to_string())
            .collect();
        let mut declared: Vec<String> = DECLARATIONS.iter().map(|(n, _)| n.to_string()).collect();
        routed.sort();
        declared.sort();
        assert_eq!(routed, declared);
    }

    #[test]
    fn a_call_of_a_tool_without_a_declaration_is_refused_not_skipped() {
        let call = json!({"params": {"name": "context_forget", "arguments": {}}});
        assert!(declared_call(&call).is_err());
        let load = json!({"params": {"name": "context_load", "arguments": {"project_path": "/x"}}});
        assert!(declared_call(&load).is_ok_and(|d| d.is_some()));
    }
}
