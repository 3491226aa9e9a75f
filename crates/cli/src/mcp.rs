//! `memloop mcp`: the MCP server of `memloop-mcp` on stdio (or Streamable HTTP with `--http`),
//! configured from the global flags.

use crate::args::{McpArgs, SummaryArgs};
use crate::context::Context;
use anyhow::{Context as _, bail};
use memloop_core::model::Model;
use memloop_mcp::McpConfig;
use memloop_providers::{OpenAiCompatModel, OpenAiConfig};
use std::sync::Arc;
use std::time::Duration;

/// The server configuration for `args` and the global flags: roots default to the project.
pub fn config(args: &McpArgs, ctx: &Context) -> McpConfig {
    let roots = if args.roots.is_empty() {
        vec![ctx.project.clone()]
    } else {
        args.roots
            .iter()
            .map(|r| {
                if r.is_absolute() {
                    r.clone()
                } else {
                    ctx.cwd.join(r)
                }
            })
            .collect()
    };
    McpConfig {
        roots,
        allow_any_project: args.allow_any_project,
        env: ctx.env.clone(),
        claude: ctx.claude,
        memory_dir: ctx.memory_dir.clone(),
        limits: limits(args),
        no_claude_md: args.no_claude_md,
        embedder: None,
        summaries: Default::default(),
        stores: None,
        cache_bytes: args.cache_mib.map(|m| m.saturating_mul(1024 * 1024)),
        reveal_store: args.reveal_store,
    }
}

/// The size caps: the defaults, with each flag given replacing its cap.
fn limits(args: &McpArgs) -> memloop_mcp::McpLimits {
    let d = memloop_mcp::McpLimits::default();
    memloop_mcp::McpLimits {
        max_entry_bytes: args.max_entry_bytes.unwrap_or(d.max_entry_bytes),
        max_batch_bytes: args.max_batch_bytes.unwrap_or(d.max_batch_bytes),
        max_answer_bytes: args.max_answer_bytes.unwrap_or(d.max_answer_bytes),
        ..d
    }
}

/// The per-token limits of `--http`: the defaults, with each flag given replacing its limit.
fn token_limits(args: &McpArgs) -> memloop_mcp::TokenLimits {
    let d = memloop_mcp::TokenLimits::default();
    memloop_mcp::TokenLimits {
        concurrent: args.token_concurrency.unwrap_or(d.concurrent),
        rate: args.token_rate.unwrap_or(d.rate),
        burst: args.token_burst.unwrap_or(d.burst),
    }
}

/// The summary models `args` name: the provider configured from the environment the CLI was
/// given, and the fallback endpoint. A model name without a provider is an error.
pub fn summary_config(
    args: &SummaryArgs,
    ctx: &Context,
) -> anyhow::Result<memloop_mcp::SummaryConfig> {
    let model = match (&args.summary_provider, &args.summary_model) {
        (Some(provider), name) => Some(
            memloop_providers::from_env_with(provider, name.as_deref(), &ctx.env)
                .with_context(|| format!("cannot configure the {provider} summary model"))?,
        ),
        (None, Some(name)) => bail!(
            "--summary-model {name} needs --summary-provider anthropic|openai (or \
             MEMLOOP_SUMMARY_PROVIDER)"
        ),
        (None, None) => None,
    };
    let fallback = match &args.summary_fallback_url {
        Some(url) => {
            let mut c = OpenAiConfig::new(url.clone(), args.summary_fallback_model.clone());
            c.timeout = Some(Duration::from_secs(120));
            let m: Arc<dyn Model> = Arc::new(
                OpenAiCompatModel::new(c).context("cannot configure the summary fallback")?,
            );
            Some(m)
        }
        None => None,
    };
    Ok(memloop_mcp::SummaryConfig {
        model,
        fallback,
        ..Default::default()
    })
}

/// Serve until the client closes stdin. stdout carries the protocol only; logs go to stderr.
/// With an embedder (`--embed-url`, `--embed-model`, or the model in the Hugging Face cache),
/// `context_search` ranks with the hybrid selector; one that cannot be set up is a warning and
/// the server ranks with BM25.
pub async fn run(args: &McpArgs, ctx: &Context) -> anyhow::Result<()> {
    let mut config = config(args, ctx);
    #[cfg(feature = "postgres")]
    {
        config.stores = crate::mcp_team::from_context(ctx)?;
    }
    config.summaries = summary_config(&args.summary, ctx)?;
    if config.summaries.enabled() {
        tracing::info!(summaries = ?config.summaries, "background summaries on");
    }
    config.embedder = match crate::embed::embedder_if_configured(&args.embed, &ctx.env).await {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "no embedder: context_search ranks with BM25");
            None
        }
    };
    if let Some(embedder) = config.embedder.clone() {
        // A model opened lazily loads now, while the client connects, so the first
        // `context_search` ranks with it instead of spending its budget on the load.
        tokio::spawn(async move {
            if let Err(e) = embedder.ready().await {
                tracing::warn!(error = %e, "the embedding model did not load: context_search ranks with BM25");
            }
        });
    }
    match args.http {
        Some(addr) => serve_http(args, addr, config).await,
        None => {
            if args.tls_cert.is_some() || args.tls_key.is_some() {
                tracing::warn!(
                    "--tls-cert/--tls-key (MEMLOOP_TLS_CERT/KEY) ignored without --http"
                );
            }
            memloop_mcp::serve_stdio(config).await?;
            Ok(())
        }
    }
}

/// `--http ADDR`: serve until SIGINT or SIGTERM, over HTTPS with `--tls-cert`/`--tls-key`;
/// warnings (a network address without TLS) go to stderr. Unusable certificate or key files
/// stop it before binding, naming the file.
async fn serve_http(
    args: &McpArgs,
    addr: std::net::SocketAddr,
    config: memloop_mcp::McpConfig,
) -> anyhow::Result<()> {
    use std::io::Write as _;
    let tokens = match &args.token_file {
        Some(path) => Some(memloop_mcp::Tokens::load(path)?),
        None => None,
    };
    let tls = match (&args.tls_cert, &args.tls_key) {
        (Some(cert), Some(key)) => Some(memloop_mcp::TlsIdentity::load(cert, key)?),
        (None, None) => None,
        _ => bail!("--tls-cert and --tls-key go together"),
    };
    let scheme = if tls.is_some() { "https" } else { "http" };
    let shutdown = tokio_util::sync::CancellationToken::new();
    let options = memloop_mcp::HttpOptions {
        addr,
        tokens,
        insecure_no_auth: args.insecure_no_auth,
        tls,
        shutdown: shutdown.clone(),
        sessions: args.sessions.then(memloop_mcp::SessionCaps::default),
        limits: token_limits(args),
        body_timeout: memloop_mcp::BODY_READ_TIMEOUT,
    };
    if let Some(warning) = memloop_mcp::check_bind(&options)? {
        let _ = writeln!(std::io::stderr(), "memloop: warning: {warning}");
    }
    let stop = shutdown.clone();
    tokio::spawn(async move {
        let term = async {
            #[cfg(unix)]
            if let Ok(mut s) =
                tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            {
                s.recv().await;
                return;
            }
            std::future::pending::<()>().await;
        };
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {},
            () = term => {},
        }
        stop.cancel();
    });
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        if let Ok(bound) = rx.await {
            let _ = writeln!(
                std::io::stderr(),
                "memloop: serving MCP on {scheme}://{bound}/mcp"
            );
        }
    });
    memloop_mcp::serve_http(memloop_mcp::MemoryServer::new(config), options, Some(tx)).await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::args::{Cli, Command};
    use clap::Parser;

    #[test]
    fn size_cap_flags_reach_the_server_config() {
        let cli = Cli::try_parse_from([
            "memloop",
            "mcp",
            "--max-entry-bytes",
            "10",
            "--max-answer-bytes",
            "2000",
            "--no-claude-md",
        ])
        .unwrap();
        let Command::Mcp(args) = &cli.command else {
            panic!("not the mcp command")
        };
        let ctx = Context::new(
            &cli,
            "/w".into(),
            memloop_host::env::EnvVars::from_pairs([("HOME", "/h")]),
        );
        let c = config(args, &ctx);
        let d = memloop_mcp::McpLimits::default();
        assert_eq!(c.limits.max_entry_bytes, 10);
        assert_eq!(c.limits.max_answer_bytes, 2000);
        assert_eq!(c.limits.max_batch_bytes, d.max_batch_bytes);
        assert!(c.no_claude_md);
        assert!(!c.reveal_store);
    }

    #[test]
    fn http_flags_reach_the_server_options() {
        let parse = |argv: &[&str]| {
            let cli = Cli::try_parse_from(argv).unwrap();
            let Command::Mcp(args) = cli.command else {
                panic!("not the mcp command")
            };
            args
        };
        let d = parse(&["memloop", "mcp", "--http", "127.0.0.1:0"]);
        assert!(!d.sessions && !d.reveal_store);
        assert_eq!(token_limits(&d), memloop_mcp::TokenLimits::default());
        let a = parse(&[
            "memloop",
            "mcp",
            "--http",
            "127.0.0.1:0",
            "--sessions",
            "--token-concurrency",
            "4",
            "--token-rate",
            "2.5",
            "--token-burst",
            "9",
            "--reveal-store",
        ]);
        assert!(a.sessions && a.reveal_store);
        assert_eq!(
            token_limits(&a),
            memloop_mcp::TokenLimits {
                concurrent: 4,
                rate: 2.5,
                burst: 9
            }
        );
        let cli = Cli::try_parse_from(["memloop", "mcp", "--reveal-store"]).unwrap();
        let Command::Mcp(args) = &cli.command else {
            panic!("not the mcp command")
        };
        let ctx = Context::new(
            &cli,
            "/w".into(),
            memloop_host::env::EnvVars::from_pairs([("HOME", "/h")]),
        );
        assert!(config(args, &ctx).reveal_store);
        // The HTTP-only flags need --http.
        assert!(Cli::try_parse_from(["memloop", "mcp", "--sessions"]).is_err());
    }

    fn summary_args(argv: &[&str]) -> SummaryArgs {
        let cli = Cli::try_parse_from(argv).unwrap();
        let Command::Mcp(args) = cli.command else {
            panic!("not the mcp command")
        };
        args.summary
    }

    #[test]
    fn summary_flags_configure_the_provider_and_the_fallback() {
        let ctx = |pairs: Vec<(&str, &str)>| {
            let cli = Cli::try_parse_from(["memloop", "mcp"]).unwrap();
            Context::new(
                &cli,
                "/w".into(),
                memloop_host::env::EnvVars::from_pairs(pairs),
            )
        };
        let none = summary_config(&summary_args(&["memloop", "mcp"]), &ctx(vec![])).unwrap();
        assert!(!none.enabled());
        let both = summary_config(
            &summary_args(&[
                "memloop",
                "mcp",
                "--summary-provider",
                "openai",
                "--summary-model",
                "qwen2.5",
                "--summary-fallback-url",
                "http://127.0.0.1:8089/v1",
            ]),
            &ctx(vec![("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")]),
        )
        .unwrap();
        assert_eq!(both.model.as_ref().unwrap().name(), "qwen2.5");
        assert_eq!(both.fallback.as_ref().unwrap().name(), "local");
        let err = summary_config(
            &summary_args(&["memloop", "mcp", "--summary-model", "x"]),
            &ctx(vec![]),
        )
        .unwrap_err();
        assert!(err.to_string().contains("--summary-provider"), "{err}");
        let err = summary_config(
            &summary_args(&["memloop", "mcp", "--summary-provider", "anthropic"]),
            &ctx(vec![]),
        )
        .unwrap_err();
        assert!(format!("{err:#}").contains("ANTHROPIC_API_KEY"), "{err:#}");
    }
}
