//! `memory path`: where the memory dir is and which rule chose it.

use crate::context::{Context, Io, write_json};
use serde_json::json;

/// Print the resolved memory dir, the rule, the reason and whether it exists.
pub fn path(ctx: &Context, io: &mut Io<'_>) -> anyhow::Result<()> {
    let resolved = ctx.resolve()?;
    let exists = resolved.dir.is_dir();
    let flavor = if ctx.claude { "claude-code" } else { "memloop" };
    if ctx.json {
        return write_json(
            io.out,
            &json!({
                "dir": resolved.dir,
                "rule": resolved.rule.to_string(),
                "reason": resolved.reason,
                "exists": exists,
                "layout": flavor,
                "project": ctx.project,
            }),
        );
    }
    writeln!(io.out, "{}", resolved.dir.display())?;
    writeln!(io.out, "  rule:   {} ({})", resolved.rule, resolved.reason)?;
    writeln!(io.out, "  layout: {flavor}")?;
    writeln!(
        io.out,
        "  exists: {}",
        if exists {
            "yes"
        } else {
            "no (created on first write)"
        }
    )?;
    Ok(())
}
