//! The command line grammar (clap derive).

use memloop_store::MemoryType;
use std::path::PathBuf;

/// The exit-code table shown at the end of `memloop --help`.
pub const EXIT_CODES_HELP: &str = "\
Exit codes:
  0  success
  1  runtime or I/O error
  2  usage error (unknown command, bad flag or argument)
  3  not found (no such memory topic, no memory directory, no project directory)
  4  refused (secret filter, path containment, name or frontmatter validation)
  5  aborted (`memory clear` not confirmed)
  6  team push/pull: some entries failed or were refused (secret filter)
  7  team push/pull: some entries conflict (and none failed)";

/// `memloop`: inspect and edit a project's memory dir and its instruction files.
#[derive(Debug, clap::Parser)]
#[command(name = "memloop", version, about, after_help = EXIT_CODES_HELP)]
pub struct Cli {
    /// The project directory (default: the current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Use this memory directory instead of resolving one (relative paths are taken from the
    /// current directory).
    #[arg(long, global = true, value_name = "DIR")]
    pub memory_dir: Option<PathBuf>,
    /// Use Claude Code's layout: `CLAUDE_CONFIG_DIR` or `~/.claude`, `autoMemoryDirectory`.
    #[arg(long, global = true)]
    pub claude: bool,
    /// Machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// The team memory database (PostgreSQL URL). `memory` commands act on the team store
    /// instead of the local dir; `team` commands also read `MEMLOOP_DATABASE_URL`.
    #[cfg(feature = "postgres")]
    #[arg(long, global = true, value_name = "URL")]
    pub database_url: Option<String>,
    /// The team project id (default: the git `origin` URL of the project, else `dir:` and its canonical path).
    #[cfg(feature = "postgres")]
    #[arg(long, global = true, value_name = "ID")]
    pub team_project: Option<String>,
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Top-level commands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Inspect and edit the project's memories (alone: the memory dir and each memory's size).
    #[command(after_help = EXIT_CODES_HELP)]
    Memory(MemoryArgs),
    /// Which CLAUDE.md / AGENTS.md files load for the project, their sizes, and what was skipped.
    #[command(after_help = EXIT_CODES_HELP)]
    Instructions(InstructionsArgs),
    /// Past sessions of the project: list their transcripts, show one, search them.
    #[command(subcommand, after_help = EXIT_CODES_HELP)]
    Sessions(SessionsCommand),
    /// Serve project memory to MCP clients (Claude Code, ...) over stdio: tools context_load,
    /// context_search, context_save, context_manage and the index as a resource.
    Mcp(Box<McpArgs>),
    /// Sync the memory dir with the team store on PostgreSQL.
    #[cfg(feature = "postgres")]
    #[command(subcommand, after_help = EXIT_CODES_HELP)]
    Team(TeamCommand),
    /// Local embedding models: which memloop knows and which are fetched (`list`), download one
    /// into the Hugging Face cache (`fetch`). Recall uses a fetched model by default.
    #[cfg(feature = "candle")]
    #[command(subcommand, after_help = EXIT_CODES_HELP)]
    Models(ModelsCommand),
}

/// `memloop models ...`.
#[cfg(feature = "candle")]
#[derive(Debug, clap::Subcommand)]
pub enum ModelsCommand {
    /// The models memloop knows: languages, dimension, download size, whether the cache holds
    /// them, and which one recall uses.
    List,
    /// Download a model into the Hugging Face cache (`HF_HUB_CACHE` / `HF_HOME`; from
    /// `HF_ENDPOINT`, default huggingface.co; `HF_TOKEN` for gated ones) and check it loads.
    Fetch {
        /// A known model's name (`multilingual-e5-small`, see `models list`) or a Hugging Face
        /// repository (`owner/name`) holding a sentence-transformers model.
        name: String,
    },
}

/// `memloop sessions ...`: the project's session transcripts (`<session id>.jsonl` where the
/// memory store keeps transcripts: the project dir holding the memory dir).
#[derive(Debug, clap::Subcommand)]
pub enum SessionsCommand {
    /// Sessions, newest first: id, last modified, messages, first user message.
    List,
    /// Print a session's messages.
    Show {
        /// The session id (as `sessions list` shows it).
        id: String,
    },
    /// Messages of past sessions containing every word of the query, newest session first.
    Search {
        /// Words that must all appear (case-insensitive).
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Show at most this many messages.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
    },
}

/// `memloop mcp`.
#[derive(Debug, clap::Args)]
pub struct McpArgs {
    /// Serve projects under this directory (repeatable; default: `--project` or the current
    /// directory). Project paths outside every root are refused.
    #[arg(long = "root", value_name = "DIR")]
    pub roots: Vec<PathBuf>,
    /// Serve any existing project directory a client names.
    #[arg(long)]
    pub allow_any_project: bool,
    /// `init_project` leaves the project's CLAUDE.md alone (by default it writes the usage
    /// block there, between markers).
    #[arg(long)]
    pub no_claude_md: bool,
    /// Largest memory one save or update may store, in bytes of its whole text (frontmatter
    /// and content; default 65536): the size rule of the server's stores.
    #[arg(long, value_name = "BYTES")]
    pub max_entry_bytes: Option<usize>,
    /// Largest total `content` of one `context_save` call, in bytes (default 1048576).
    #[arg(long, value_name = "BYTES")]
    pub max_batch_bytes: Option<usize>,
    /// Largest answer, in bytes of JSON (default 262144); longer ones are cut with a note.
    #[arg(long, value_name = "BYTES")]
    pub max_answer_bytes: Option<usize>,
    /// Memory budget of the per-project caches (headers, search postings, vectors), in MiB
    /// (default 256): past it the least recently used projects' caches are dropped and
    /// rebuilt from their store when needed again.
    #[arg(long = "cache-mib", value_name = "MIB")]
    pub cache_mib: Option<usize>,
    /// `context_search` ranks with the hybrid selector when an embedder is named here, or when
    /// all-MiniLM-L6-v2 is in the Hugging Face cache (`candle` builds); else with BM25.
    #[command(flatten)]
    pub embed: EmbedArgs,
    /// Which models write each saved entry's abstract and overview in the background.
    #[command(flatten)]
    pub summary: SummaryArgs,
    /// Serve over MCP's Streamable HTTP transport at this address (`127.0.0.1:8765`; the
    /// endpoint is `/mcp`) instead of stdio.
    #[arg(long, value_name = "ADDR")]
    pub http: Option<std::net::SocketAddr>,
    /// Accepted bearer tokens, one per line: `TOKEN [PROJECT-GLOB] [read|write]` (with `--http`;
    /// required for a non-loopback address).
    #[arg(long, value_name = "FILE", requires = "http")]
    pub token_file: Option<PathBuf>,
    /// Serve a non-loopback `--http` address without tokens (every client on the network can
    /// read and write every served project).
    #[arg(long, requires = "http")]
    pub insecure_no_auth: bool,
    /// Serve `--http` over HTTPS with this PEM certificate chain (server certificate first),
    /// together with `--tls-key`.
    #[arg(
        long,
        env = "MEMLOOP_TLS_CERT",
        value_name = "CERT.pem",
        requires = "tls_key"
    )]
    pub tls_cert: Option<PathBuf>,
    /// The PEM private key (PKCS#8, PKCS#1 or SEC1) of `--tls-cert`.
    #[arg(
        long,
        env = "MEMLOOP_TLS_KEY",
        value_name = "KEY.pem",
        requires = "tls_cert"
    )]
    pub tls_key: Option<PathBuf>,
    /// Open MCP sessions for clients of protocols before 2026-07-28 (held in this process:
    /// a client must reach the server that opened its session). By default `--http` keeps no
    /// session, so any replica behind a load balancer answers any request.
    #[arg(long, requires = "http")]
    pub sessions: bool,
    /// Most requests one token may have in flight at once (default 32; 0: no limit). Past it:
    /// HTTP 429 with `Retry-After`.
    #[arg(long, value_name = "N", requires = "http")]
    pub token_concurrency: Option<usize>,
    /// Requests per second one token may send on average (default 100; 0: no limit). Each
    /// server counts alone: N replicas admit about N times this. Past it: HTTP 429 with
    /// `Retry-After`.
    #[arg(long, value_name = "PER-SECOND", requires = "http")]
    pub token_rate: Option<f64>,
    /// Requests one token may send at once after a quiet spell (default 200).
    #[arg(long, value_name = "N", requires = "http")]
    pub token_burst: Option<u32>,
    /// Name the store in answers (the database URL without its password, the memory dirs'
    /// paths); by default answers name only its kind (`postgres`, `files`).
    #[arg(long)]
    pub reveal_store: bool,
}

/// Background summaries of `memloop mcp`: off unless a provider or a fallback URL is given.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SummaryArgs {
    /// The provider that writes summaries: `anthropic` or `openai` (configured by its usual
    /// variables: ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL, or OPENAI_BASE_URL / OPENAI_API_KEY).
    #[arg(long, env = "MEMLOOP_SUMMARY_PROVIDER", value_name = "PROVIDER")]
    pub summary_provider: Option<String>,
    /// Its model name (default: the provider's `*_MODEL` variable, else its default).
    #[arg(long, env = "MEMLOOP_SUMMARY_MODEL", value_name = "NAME")]
    pub summary_model: Option<String>,
    /// An OpenAI-compatible endpoint tried when the provider fails (base URL with the version
    /// path, e.g. http://127.0.0.1:8089/v1 for llama.cpp or http://127.0.0.1:11434/v1 for
    /// Ollama); no key is sent.
    #[arg(long, env = "MEMLOOP_SUMMARY_FALLBACK_URL", value_name = "URL")]
    pub summary_fallback_url: Option<String>,
    /// The fallback endpoint's model name.
    #[arg(
        long,
        env = "MEMLOOP_SUMMARY_FALLBACK_MODEL",
        value_name = "NAME",
        default_value = "local"
    )]
    pub summary_fallback_model: String,
}

/// `memloop team ...`: sync between the local memory dir and the team store.
#[cfg(feature = "postgres")]
#[derive(Debug, clap::Subcommand)]
pub enum TeamCommand {
    /// Send local changes to the team store (entries changed on the server are conflicts).
    ///
    /// Files travel as written: every frontmatter key (`tags:`, `metadata:`, comments) and the
    /// body byte for byte. An entry a teammate deleted with `--prune` that you edited since is
    /// re-created on the server (your edit is newer than the deletion).
    Push(TeamSyncArgs),
    /// Bring the team store's changes into the memory dir (the server wins; conflicting local
    /// edits are kept in `.memloop-team-conflicts/`).
    ///
    /// Files are written as their author had them (every frontmatter key, the body byte for
    /// byte). An entry deleted on the server that you edited since is left alone, even with
    /// `--prune`: `push` re-creates it.
    Pull(TeamSyncArgs),
    /// What push and pull would move.
    Status(TeamSyncArgs),
}

/// Options of `team push|pull|status`.
#[cfg(feature = "postgres")]
#[derive(Debug, clap::Args)]
pub struct TeamSyncArgs {
    /// Propagate deletions (off: a deletion is only reported).
    #[arg(long)]
    pub prune: bool,
    /// Sync only this subfolder of the memory dir (e.g. `team`; the default when
    /// `MEMLOOP_TEAM_MEMORY` is on, so private memories stay on this machine).
    #[arg(long, value_name = "SUBDIR")]
    pub subdir: Option<String>,
}

/// `memloop memory [COMMAND]`.
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct MemoryArgs {
    /// What to do; none: the memory dir, its index and each memory with its size.
    #[command(subcommand)]
    pub command: Option<MemoryCommand>,
}

/// `memloop memory ...`.
#[derive(Debug, clap::Subcommand)]
pub enum MemoryCommand {
    /// Where the memory dir is, which rule chose it and why, and whether it exists.
    Path,
    /// List memories (newest first): type, path, modification time, description.
    List {
        /// Only memories of this type (user, feedback, project, reference).
        #[arg(long = "type", value_name = "TYPE")]
        memory_type: Option<MemoryType>,
    },
    /// Print a memory (`MEMORY` prints the index).
    Show {
        /// Topic name (`testing_prefs`), file name (`testing_prefs.md`) or relative path
        /// (`feedback/testing.md`).
        topic: String,
    },
    /// Open a memory in `$VISUAL` / `$EDITOR` (else `vi`), validate it and save it through the
    /// store.
    Edit {
        /// Topic name, file name or relative path; a new topic starts from a template.
        topic: String,
    },
    /// Remove a memory and its index line.
    Rm {
        /// Topic name, file name or relative path.
        topic: String,
    },
    /// Remove every memory and the index (asks for `yes` on stdin).
    Clear {
        /// Do not ask for confirmation.
        #[arg(long, short = 'y')]
        yes: bool,
    },
    /// Consolidate the memory dir now (merge, dedup, prune) with a forked agent on the model
    /// `--provider` / `--model` name; the dream's gates apply unless `--force`, its lock always.
    Dream {
        /// Skip the time, scan-throttle and session-count gates (the lock still applies).
        #[arg(long)]
        force: bool,
        /// The model that consolidates.
        #[command(flatten)]
        model: ModelArgs,
    },
    /// Ranked search over memory names, descriptions and bodies.
    Search {
        /// Words to look for.
        #[arg(required = true, num_args = 1..)]
        query: Vec<String>,
        /// Show at most this many results.
        #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
        limit: u32,
        /// Require ranking by meaning as well as words (BM25 fused with an embedding model's
        /// similarity; vectors cached beside the memory dir): an error without a model. With a
        /// model configured or fetched (`memloop models fetch`) this is the default anyway.
        #[arg(long, conflicts_with = "lexical")]
        semantic: bool,
        /// Rank by words alone (BM25), even with a model.
        #[arg(long)]
        lexical: bool,
        /// Where the embeddings come from (default: the model configured or fetched).
        #[command(flatten)]
        embed: EmbedArgs,
    },
}

/// Where recall's embeddings come from: a directory, an endpoint, else the model configured or
/// fetched (`memloop models fetch`). Nothing is downloaded unless asked.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct EmbedArgs {
    /// A local sentence-transformers model directory (config.json, tokenizer.json,
    /// model.safetensors), run in-process (needs the `candle` build feature).
    #[arg(long, env = "MEMLOOP_EMBED_MODEL", value_name = "DIR")]
    pub embed_model: Option<PathBuf>,
    /// An OpenAI-compatible embeddings endpoint (base URL with the version path, e.g.
    /// http://127.0.0.1:11434/v1); the key, if any, comes from OPENAI_API_KEY.
    #[arg(
        long,
        env = "MEMLOOP_EMBED_URL",
        value_name = "URL",
        conflicts_with = "embed_model"
    )]
    pub embed_url: Option<String>,
    /// The endpoint's model name.
    #[arg(
        long,
        env = "MEMLOOP_EMBED_NAME",
        value_name = "NAME",
        default_value = "text-embedding-3-small"
    )]
    pub embed_name: String,
    /// The query and passage prefixes of an asymmetric retrieval model: `e5` ("query: " and
    /// "passage: "), `bge` (bge English v1.5's query instruction) or `none`.
    #[arg(
        long,
        env = "MEMLOOP_EMBED_PREFIXES",
        value_name = "FAMILY",
        value_enum,
        default_value = "none"
    )]
    pub embed_prefixes: EmbedPrefixes,
    /// How --embed-url is told a query from a memory: `none` or `input-type`. A server that
    /// adds the prefixes itself wants --embed-prefixes none.
    #[arg(
        long,
        env = "MEMLOOP_EMBED_ROLES",
        value_name = "HOW",
        value_enum,
        default_value = "none"
    )]
    pub embed_roles: EmbedRoleMode,
    /// The endpoint's model name for queries (with --embed-passage-name, instead of
    /// --embed-name).
    #[arg(
        long,
        env = "MEMLOOP_EMBED_QUERY_NAME",
        value_name = "NAME",
        requires = "embed_passage_name"
    )]
    pub embed_query_name: Option<String>,
    /// The endpoint's model name for memories (with --embed-query-name).
    #[arg(
        long,
        env = "MEMLOOP_EMBED_PASSAGE_NAME",
        value_name = "NAME",
        requires = "embed_query_name"
    )]
    pub embed_passage_name: Option<String>,
}

/// The prefix conventions `--embed-prefixes` knows.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EmbedPrefixes {
    /// The model takes texts as they are (sentence-transformers models, bge-m3).
    #[default]
    None,
    /// e5 models: "query: " before queries, "passage: " before memories.
    E5,
    /// bge English v1.5 models: an instruction before queries.
    Bge,
}

/// How `--embed-roles` tells an endpoint a query from a memory.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum EmbedRoleMode {
    /// Queries and memories are sent alike.
    #[default]
    None,
    /// Each request carries `"input_type": "query"` or `"passage"`.
    InputType,
}

/// The chat model a command runs (`memory dream`), configured as the providers read their
/// environment: `ANTHROPIC_API_KEY` / `ANTHROPIC_BASE_URL` / `ANTHROPIC_MODEL`, or
/// `OPENAI_BASE_URL` / `OPENAI_API_KEY` / `OPENAI_MODEL` (any OpenAI-compatible server).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ModelArgs {
    /// `anthropic` or `openai` (an OpenAI-compatible endpoint).
    #[arg(long, env = "MEMLOOP_PROVIDER", value_name = "PROVIDER")]
    pub provider: Option<String>,
    /// The model name (default: the provider's `*_MODEL` variable, else its default).
    #[arg(long, env = "MEMLOOP_MODEL", value_name = "NAME")]
    pub model: Option<String>,
}

/// `memloop instructions`.
#[derive(Debug, clap::Args)]
pub struct InstructionsArgs {
    /// Load the AGENTS.md family instead of CLAUDE.md.
    #[arg(long)]
    pub agents: bool,
}
