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
        limits: Default::default(),
        no_claude_md: args.no_claude_md,
        embedder: None,
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
