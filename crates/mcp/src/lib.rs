//! # memloop-mcp
//!
//! An MCP server (stdio or Streamable HTTP) that gives any MCP client project memory, on the same memory dirs the
//! memloop library and CLI use: `context_load`, `context_search`, `context_save`,
//! `context_manage`, plus each project's `MEMORY.md` as a resource. Every write goes through
//! [`MemoryStore`](memloop_store::MemoryStore) (atomic, locked, secret-filtered,
//! indexed); search goes through the recall layer's BM25 selector.
//!
//! `memloop mcp` runs [`serve_stdio`], and `memloop mcp --http ADDR` runs [`serve_http`]
//! (Streamable HTTP behind bearer [`Tokens`]); embed [`MemoryServer`] to serve another transport.

mod access;
mod answer;
mod batch;
mod bounded;
mod disclosure;
mod echo;
mod http;
mod jsonrpc;
mod key;
mod limits;
mod logs;
mod mapping;
mod metrics;
mod onboarding;
mod ops;
mod pages;
mod projects;
mod save;
mod server;
mod stdio;
mod store_spans;
mod summaries;
#[cfg(feature = "postgres")]
mod team;
mod tiers;
mod tls;
mod trace;

pub use access::{Access, Denied, Effect, Grant, ProjectGlob, TokenScope};
pub use answer::McpLimits;
pub use batch::{AnswerOf, AtomicBatches, BatchFuture, Batched, SaveKey};
pub use echo::MAX_ECHO_CHARS;
pub use http::{
    BODY_READ_TIMEOUT, HttpOptions, MAX_SESSIONS, MAX_SESSIONS_PER_TOKEN, SessionCaps,
    TokenFileError, Tokens, check_bind, serve_http,
};
pub use key::{MemoryKey, OWNER_FILE, Reach};
pub use limits::{TOKEN_BURST, TOKEN_CONCURRENT, TOKEN_RATE, TokenLimits};
pub use logs::{loggable, loggable_text};
pub use metrics::PoolUse;
pub use onboarding::{BLOCK_BEGIN, BLOCK_END};
pub use projects::{
    ClaimFuture, DEFAULT_CACHE_BYTES, McpConfig, OpenFuture, OpenStoreFuture, OpenedStore, Project,
    ProjectStores, ReadyFuture, project_id,
};
pub use server::{INDEX_MIME, McpServeError, MemoryServer, RESOURCE_PREFIX, serve_stdio};
pub use summaries::{SUMMARY_PURPOSE, SummaryConfig};
#[cfg(feature = "postgres")]
pub use team::{READY_TIMEOUT, SERVER_POOL_SIZE, TeamStores};
pub use tiers::L1_MAX_BYTES;
pub use tls::TlsIdentity;
