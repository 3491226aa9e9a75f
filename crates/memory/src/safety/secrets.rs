//! The sensitive-data filter: content that looks like a credential is refused
//! with an error naming the pattern, never the secret.

use crate::types::MemoryError;
use regex::Regex;
use std::sync::OnceLock;

/// One named credential shape.
#[derive(Debug, Clone)]
pub struct SecretPattern {
    /// Human name used in the error (e.g. `GitHub token`).
    pub name: &'static str,
    regex: Regex,
    /// For assignments: the capture group holding the value, which must look secret-like.
    value_group: Option<usize>,
}

/// Credential-like keys in `key = value` / `key: value` assignments. The key may carry a prefix
/// (`DB_PASSWORD`, `github.token`).
const ASSIGNMENT: &str = r#"(?i)(?:^|[^A-Za-z0-9])[A-Za-z0-9_.-]*(?:password|passwd|pwd|passphrase|api[_-]?key|secret(?:[_-]?key)?|token|access[_-]?key|private[_-]?key|client[_-]?secret|credentials?)["']?[ \t]*[:=][ \t]*["']?([^\s"'`,;)]+)"#;

fn patterns() -> &'static [SecretPattern] {
    static PATTERNS: OnceLock<Vec<SecretPattern>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let raw: [(&'static str, &str, Option<usize>); 8] = [
            (
                "private key block",
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----",
                None,
            ),
            ("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", None),
            (
                "GitHub token",
                r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b",
                None,
            ),
            (
                "JSON Web Token",
                r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
                None,
            ),
            ("Slack token", r"\bxox[abprs]-[A-Za-z0-9-]{10,}", None),
            (
                "API key (sk-...)",
                r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
                None,
            ),
            (
                "bearer token",
                r"(?i)\bbearer[ \t]+[A-Za-z0-9._~+/=-]{20,}",
                None,
            ),
            (
                "credential assignment (password/api_key/token/secret = value)",
                ASSIGNMENT,
                Some(1),
            ),
        ];
        raw.into_iter()
            .filter_map(|(name, re, value_group)| match Regex::new(re) {
                Ok(regex) => Some(SecretPattern {
                    name,
                    regex,
                    value_group,
                }),
                Err(e) => {
                    tracing::error!(pattern = name, error = %e, "secret pattern failed to compile");
                    None
                }
            })
            .collect()
    })
}

/// Whether an assigned value looks like a real secret rather than prose or a reference: it
/// contains a digit, an uppercase letter or a symbol, or is at least 12 characters long, and it
/// is not a placeholder or lookup (`$VAR`, `<...>`, `{{...}}`, `%s`, `***`, a call like
/// `os.getenv(`). `secret: rotation` is prose; `password = hunter2` is not.
fn value_looks_secret(v: &str) -> bool {
    let v = v.trim_end_matches(['.', ':']);
    if v.len() < 4
        || v.starts_with(['$', '<', '{', '%', '*'])
        || v.contains('(')
        || v.starts_with("process.env")
        || v.starts_with("os.environ")
    {
        return false;
    }
    v.len() >= 12 || v.chars().any(|c| !c.is_ascii_lowercase())
}

/// Checks text against the credential patterns.
///
/// ```
/// use memloop_memory::store::SecretFilter;
/// assert!(SecretFilter::check("the user forgot the password reset flow").is_ok());
/// let err = SecretFilter::check("db password = hunter22").unwrap_err();
/// assert!(err.to_string().contains("credential assignment"));
/// assert!(!err.to_string().contains("hunter22"));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SecretFilter;

impl SecretFilter {
    /// The name of the first pattern that matches, if any.
    pub fn find(text: &str) -> Option<&'static str> {
        patterns().iter().find_map(|p| {
            let hit = match p.value_group {
                None => p.regex.is_match(text),
                Some(g) => p
                    .regex
                    .captures_iter(text)
                    .any(|c| c.get(g).is_some_and(|m| value_looks_secret(m.as_str()))),
            };
            hit.then_some(p.name)
        })
    }

    /// `Err(SensitiveData)` naming the pattern when `text` looks like it holds a credential.
    pub fn check(text: &str) -> Result<(), MemoryError> {
        match Self::find(text) {
            Some(pattern) => {
                tracing::warn!(pattern, "memory write refused: looks like a credential");
                Err(MemoryError::SensitiveData {
                    pattern: pattern.to_owned(),
                })
            }
            None => Ok(()),
        }
    }
}
