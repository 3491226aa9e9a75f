//! Conditional rules: the `paths:` frontmatter of `rules/**/*.md` files and matching it against
//! the files the agent touched.

use super::rule_pattern::RulePattern;
use memloop_host::paths::normalize_lexically;
use std::path::{Path, PathBuf};

/// The `paths:` globs of a rule's frontmatter (empty: the rule always loads).
///
/// Accepted forms: a YAML list, a single string, or a comma-separated string. When the YAML is
/// not valid (hand-written frontmatter often is not), the `paths:` key is read line by line.
pub fn rule_paths(frontmatter: Option<&str>) -> Vec<String> {
    let Some(fm) = frontmatter else {
        return Vec::new();
    };
    match serde_norway::from_str::<serde_norway::Value>(fm) {
        Ok(value) => match value.get("paths") {
            Some(serde_norway::Value::String(s)) => split_list(s),
            Some(serde_norway::Value::Sequence(items)) => items
                .iter()
                .filter_map(|v| v.as_str())
                .flat_map(split_list)
                .collect(),
            _ => Vec::new(),
        },
        Err(_) => lenient_paths(fm),
    }
}

fn split_list(s: &str) -> Vec<String> {
    s.trim()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .split(',')
        .map(|p| p.trim().trim_matches(['"', '\'']).trim().to_owned())
        .filter(|p| !p.is_empty())
        .collect()
}

fn lenient_paths(fm: &str) -> Vec<String> {
    let mut lines = fm.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix("paths:") else {
            continue;
        };
        if !rest.trim().is_empty() {
            return split_list(rest);
        }
        return lines
            .map(str::trim_end)
            .take_while(|l| l.starts_with([' ', '\t', '-']))
            .filter_map(|l| l.trim_start().strip_prefix('-'))
            .flat_map(split_list)
            .collect();
    }
    Vec::new()
}

/// Compiled globs of one rule; patterns that do not compile never match.
pub fn compile(patterns: &[String]) -> Vec<RulePattern> {
    patterns
        .iter()
        .filter_map(|p| RulePattern::new(p))
        .collect()
}

/// Whether any touched file, taken relative to `base`, matches any glob.
pub fn matches_any(globs: &[RulePattern], base: &Path, touched: &[PathBuf]) -> bool {
    touched.iter().any(|file| {
        relative_slash_path(base, file).is_some_and(|rel| globs.iter().any(|g| g.is_match(&rel)))
    })
}

/// `file` relative to `base` as a `/`-joined string; `None` when it is not under `base`.
/// Existing files are canonicalised (so symlinked temp dirs compare equal); others are
/// normalised lexically.
fn relative_slash_path(base: &Path, file: &Path) -> Option<String> {
    let file = std::fs::canonicalize(file).unwrap_or_else(|_| normalize_lexically(file));
    let rel = file.strip_prefix(base).ok()?;
    let parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_forms() {
        assert_eq!(rule_paths(None), Vec::<String>::new());
        assert_eq!(
            rule_paths(Some("paths: src/**/*.rs\n")),
            vec!["src/**/*.rs"]
        );
        assert_eq!(
            rule_paths(Some("paths:\n  - \"a/*.py\"\n  - b/**\n")),
            vec!["a/*.py", "b/**"]
        );
        assert_eq!(
            rule_paths(Some("paths: a.md, b.md\n")),
            vec!["a.md", "b.md"]
        );
        // Not valid YAML (unquoted `: ` then a tab-indented list), still read.
        assert_eq!(
            rule_paths(Some("description: a: b: c\npaths:\n\t- x/*.ts\nother: 1\n")),
            vec!["x/*.ts"]
        );
        assert_eq!(
            rule_paths(Some("description: no paths\n")),
            Vec::<String>::new()
        );
    }
}
