//! Reading the fields of a tool's JSON input.

use memloop_core::tool::ToolContext;
use memloop_host::paths::resolve_path;
use std::path::PathBuf;

/// A required string field of a tool input.
pub(crate) fn str_field<'a>(input: &'a serde_json::Value, key: &str) -> Result<&'a str, String> {
    input
        .get(key)
        .and_then(serde_json::Value::as_str)
        .ok_or_else(|| format!("missing required string field `{key}`"))
}

/// An optional non-negative integer field.
pub(crate) fn usize_field(input: &serde_json::Value, key: &str) -> Result<Option<usize>, String> {
    match input.get(key) {
        None | Some(serde_json::Value::Null) => Ok(None),
        Some(v) => v
            .as_u64()
            .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
            .ok_or_else(|| format!("`{key}` must be a non-negative integer")),
    }
}

/// The absolute path named by the `path` field.
pub(crate) fn target(input: &serde_json::Value, ctx: &ToolContext) -> Result<PathBuf, String> {
    let p = str_field(input, "path")?;
    if p.is_empty() {
        return Err("`path` is empty".into());
    }
    if p.contains('\0') {
        return Err("`path` contains a NUL byte".into());
    }
    Ok(resolve_path(&ctx.cwd, p))
}

#[cfg(test)]
pub(crate) fn test_ctx(cwd: &std::path::Path) -> ToolContext {
    ToolContext {
        session_id: "test".into(),
        cwd: cwd.to_path_buf(),
        agent: memloop_core::tool::AgentKind::Main,
        cancel: Default::default(),
    }
}
