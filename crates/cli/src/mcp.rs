//! `memloop mcp`: the MCP server of `memloop-mcp` on stdio, configured from the global flags.

use crate::args::McpArgs;
use crate::context::Context;
use memloop_mcp::McpConfig;

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

/// Serve until the client closes stdin. stdout carries the protocol only; logs go to stderr.
/// With an embedder (`--embed-url`, `--embed-model`, or the model in the Hugging Face cache),
/// `context_search` ranks with the hybrid selector; one that cannot be set up is a warning and
/// the server ranks with BM25.
pub async fn run(args: &McpArgs, ctx: &Context) -> anyhow::Result<()> {
    let mut config = config(args, ctx);
    config.embedder = match crate::embed::embedder_if_configured(&args.embed, &ctx.env).await {
        Ok(e) => e,
        Err(e) => {
            tracing::warn!(error = %e, "no embedder: context_search ranks with BM25");
            None
        }
    };
    memloop_mcp::serve_stdio(config).await?;
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
            memloop_memory::env::EnvVars::from_pairs([("HOME", "/h")]),
        );
        let c = config(args, &ctx);
        let d = memloop_mcp::McpLimits::default();
        assert_eq!(c.limits.max_entry_bytes, 10);
        assert_eq!(c.limits.max_answer_bytes, 2000);
        assert_eq!(c.limits.max_batch_bytes, d.max_batch_bytes);
        assert!(c.no_claude_md);
    }
}
