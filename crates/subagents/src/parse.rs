//! One agent definition file: YAML frontmatter (`name`, `description`, `tools`, `model`,
//! `memory`) and the system prompt as the body.

use crate::definition::AgentDefinition;
use memloop_paths::{AgentMemoryScope, sanitize_agent_type};
use memloop_text::frontmatter::{
    Closing, parse_mapping as parse_frontmatter_mapping, split as split_frontmatter,
};
use serde_norway::{Mapping, Value};
use std::path::Path;

/// The metadata key of a definition's memory scope (`memory: project`).
pub const MEMORY_KEY: &str = "memory";

/// A text value: YAML strings, and numbers or booleans written bare.
fn text(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.trim().to_owned()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A key that must hold a non-empty text.
fn required(m: &Mapping, key: &str) -> Result<String, String> {
    match m.get(key) {
        None | Some(Value::Null) => Err(format!("`{key}` is missing from its frontmatter")),
        Some(v) => match text(v) {
            Some(s) if !s.is_empty() => Ok(s),
            Some(_) => Err(format!("`{key}` is empty")),
            None => Err(format!("`{key}` must be text")),
        },
    }
}

/// An optional text key (`None` when absent, null or blank).
fn optional(m: &Mapping, key: &str) -> Result<Option<String>, String> {
    match m.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v) => text(v)
            .map(|s| (!s.is_empty()).then_some(s))
            .ok_or_else(|| format!("`{key}` must be text")),
    }
}

/// `tools`: a YAML list or a comma-separated string (either may be empty: no tools); absent
/// inherits the parent's.
fn tools(m: &Mapping) -> Result<Option<Vec<String>>, String> {
    let split = |s: &str| -> Vec<String> {
        s.split(',')
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty())
            .collect()
    };
    match m.get("tools") {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(split(s))),
        Some(Value::Sequence(items)) => items
            .iter()
            .map(|v| {
                text(v).ok_or_else(|| "`tools` lists something that is not a tool name".to_owned())
            })
            .collect::<Result<Vec<_>, _>>()
            .map(|names| Some(names.iter().flat_map(|n| split(n)).collect())),
        Some(_) => Err("`tools` must be a list or a comma-separated string".to_owned()),
    }
}

/// Parse one definition file's text. `Err` says what is wrong, for a warning naming the file.
pub(crate) fn parse_definition(text: &str, source: &Path) -> Result<AgentDefinition, String> {
    let split = split_frontmatter(text, Closing::Dashes);
    let Some(yaml) = split.frontmatter else {
        return Err(
            "it has no frontmatter (a `---` block with at least `name` and `description` at the \
             top)"
                .to_owned(),
        );
    };
    let Some(m) = parse_frontmatter_mapping(yaml) else {
        return Err("its frontmatter is not valid YAML".to_owned());
    };
    let name = required(&m, "name")?;
    if name.chars().any(char::is_control) {
        return Err(format!("`name` {name:?} contains control characters"));
    }
    // The name is also the agent's memory dir name: it must be one.
    sanitize_agent_type(&name).map_err(|e| e.to_string())?;
    let description = required(&m, "description")?;
    let tools = tools(&m)?;
    let model = optional(&m, "model")?.filter(|s| s != "inherit");
    let memory = optional(&m, MEMORY_KEY)?
        .map(|s| s.parse::<AgentMemoryScope>())
        .transpose()?;
    let system_prompt = split.body.trim();
    if system_prompt.is_empty() {
        return Err("its body (the agent's system prompt) is empty".to_owned());
    }
    let mut def = AgentDefinition::new(name, description, system_prompt);
    def.tools = tools;
    def.model = model;
    if let Some(scope) = memory {
        def.metadata
            .insert(MEMORY_KEY.to_owned(), scope.as_str().to_owned());
    }
    def.source = Some(source.to_path_buf());
    Ok(def)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<AgentDefinition, String> {
        parse_definition(text, Path::new("/p/.claude/agents/a.md"))
    }

    #[test]
    fn reads_claude_codes_fields() {
        let d = parse(
            "---\nname: code-reviewer\ndescription: Reviews code. Use proactively: after edits\n\
             tools: Read, Grep,Glob\nmodel: sonnet\nmemory: project\ncolor: blue\n---\n\nYou review code.\n",
        )
        .unwrap();
        assert_eq!(d.name, "code-reviewer");
        // The unquoted `: ` is read through the quoting retry.
        assert_eq!(d.description, "Reviews code. Use proactively: after edits");
        assert_eq!(d.tools.unwrap(), ["Read", "Grep", "Glob"]);
        assert_eq!(d.model.as_deref(), Some("sonnet"));
        assert_eq!(
            d.metadata.get(MEMORY_KEY).map(String::as_str),
            Some("project")
        );
        assert_eq!(d.system_prompt, "You review code.");
        assert_eq!(d.source.unwrap(), Path::new("/p/.claude/agents/a.md"));
    }

    #[test]
    fn tools_as_a_list_inherit_when_absent_and_none_when_empty() {
        let list =
            parse("---\nname: a\ndescription: d\ntools:\n  - read_file\n  - grep\n---\nP").unwrap();
        assert_eq!(list.tools.unwrap(), ["read_file", "grep"]);
        let absent = parse("---\nname: a\ndescription: d\nmodel: inherit\n---\nP").unwrap();
        assert_eq!((absent.tools, absent.model), (None, None));
        let empty = parse("---\nname: a\ndescription: d\ntools: []\n---\nP").unwrap();
        assert_eq!(empty.tools, Some(Vec::new()));
    }

    #[test]
    fn malformed_definitions_say_what_is_wrong() {
        let cases = [
            ("You are nobody.", "no frontmatter"),
            (
                "---\nname: a\ndescription: d\n- stray item\n---\nP",
                "not valid YAML",
            ),
            ("---\ndescription: d\n---\nP", "`name` is missing"),
            ("---\nname: a\n---\nP", "`description` is missing"),
            ("---\nname: ''\ndescription: d\n---\nP", "`name` is empty"),
            (
                "---\nname: ../x\ndescription: d\n---\nP",
                "invalid agent type `../x`",
            ),
            ("---\nname: a/b\ndescription: d\n---\nP", "path separator"),
            (
                "---\nname: a\ndescription: d\nmemory: team\n---\nP",
                "unknown memory scope `team`",
            ),
            (
                "---\nname: a\ndescription: d\ntools: {x: 1}\n---\nP",
                "`tools` must be a list",
            ),
            (
                "---\nname: a\ndescription: d\nmodel: [a, b]\n---\nP",
                "`model` must be text",
            ),
            (
                "---\nname: a\ndescription: d\n---\n\n  \n",
                "body (the agent's system prompt) is empty",
            ),
        ];
        for (text, expected) in cases {
            let err = parse(text).unwrap_err();
            assert!(err.contains(expected), "{text:?}: {err}");
        }
    }
}
