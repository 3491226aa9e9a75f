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
    confirm: Confirm,
}

/// How a pattern's match is confirmed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Confirm {
    /// The match alone is a credential (a well-known token shape, a key block).
    Shape,
    /// An assignment: group 1 is the separator, group 2 an opening quote, group 3 the value; the
    /// value must not be a placeholder and, when prose follows it, must look random.
    Assignment,
    /// Group 1 is a value that must not be a placeholder (connection-string passwords, flags).
    Value,
}

/// Credential-like keys: the key may carry a prefix (`DB_PASSWORD`, `github.token`,
/// `AWS_SECRET_ACCESS_KEY`) but must end with the credential word.
const KEY: &str = r"[A-Za-z0-9_.-]*(?:password|passwd|passphrase|pwd|secret|token|(?:api|secret|access|private|account|signing|encryption|master)[_ -]?key|apikey|client[_-]?secret|credentials?)|(?:[A-Za-z0-9_.-]*[_.-])?pass";

fn assignment() -> String {
    // key, optional closing quote of a quoted key, separator (`=`, `:`, `:=`, `=>`), optional
    // opening quote, value.
    format!(
        r#"(?i)(?:^|[^A-Za-z0-9_.-])(?:{KEY})["']?([ \t]*(?::=|=>|==?|:)[ \t]*)(["'`]?)([^\s"'`,;)\]}}>]+)"#
    )
}

fn patterns() -> &'static [SecretPattern] {
    static PATTERNS: OnceLock<Vec<SecretPattern>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let assignment = assignment();
        let raw: Vec<(&'static str, &str, Confirm)> = vec![
            (
                "private key block",
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d",
                Confirm::Shape,
            ),
            ("AWS access key id", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", Confirm::Shape),
            (
                "GitHub token",
                r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})\b",
                Confirm::Shape,
            ),
            ("GitLab token", r"\bglpat-[A-Za-z0-9_-]{20,}", Confirm::Shape),
            (
                "JSON Web Token",
                r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
                Confirm::Shape,
            ),
            ("Slack token", r"\bxox[abprse]-[A-Za-z0-9-]{10,}", Confirm::Shape),
            (
                "Slack webhook",
                r"hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
                Confirm::Shape,
            ),
            (
                "API key (sk-...)",
                r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_-]{20,}",
                Confirm::Shape,
            ),
            (
                "Stripe secret key",
                r"\b[sr]k_(?:live|test)_[A-Za-z0-9]{16,}",
                Confirm::Shape,
            ),
            ("Google API key", r"\bAIza[0-9A-Za-z_-]{35}\b", Confirm::Shape),
            ("npm token", r"\bnpm_[A-Za-z0-9]{36}\b", Confirm::Shape),
            ("PyPI token", r"\bpypi-AgE[A-Za-z0-9_-]{50,}", Confirm::Shape),
            ("Hugging Face token", r"\bhf_[A-Za-z0-9]{30,}\b", Confirm::Shape),
            (
                "SendGrid key",
                r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
                Confirm::Shape,
            ),
            (
                "bearer token",
                r"(?i)\bbearer[ \t]+[A-Za-z0-9._~+/=-]{20,}",
                Confirm::Shape,
            ),
            (
                "basic auth header",
                r"(?i)\bauthorization:[ \t]*basic[ \t]+[A-Za-z0-9+/]{8,}=*",
                Confirm::Shape,
            ),
            (
                "connection string with password (scheme://user:password@host)",
                r"(?i)\b[a-z][a-z0-9+.-]*://[^\s:/@]*:([^\s/@]+)@",
                Confirm::Value,
            ),
            (
                "credential flag (--password value)",
                r"(?i)(?:^|\s)--?(?:password|passwd|pass|token|api-key|secret|client-secret)(?:=|[ \t]+)([^\s-][^\s]*)",
                Confirm::Value,
            ),
            (
                "credential element (<password>value</password>)",
                r"(?i)<(?:password|secret|token|api_?key)>([^<\s]+)</",
                Confirm::Value,
            ),
            (
                "credential assignment (password/api_key/token/secret = value)",
                assignment.as_str(),
                Confirm::Assignment,
            ),
        ];
        raw.into_iter()
            .filter_map(|(name, re, confirm)| match Regex::new(re) {
                Ok(regex) => Some(SecretPattern {
                    name,
                    regex,
                    confirm,
                }),
                Err(e) => {
                    tracing::error!(pattern = name, error = %e, "secret pattern failed to compile");
                    None
                }
            })
            .collect()
    })
}

/// Whether a value is a placeholder, reference or flag rather than a secret: an environment or
/// template lookup (`$VAR`, `${VAR}`, `<...>`, `{{...}}`, `%s`, `os.environ[...]`, a call), a
/// mask (`***`, `xxxx`, `...`), a boolean or null, or a filesystem path.
fn is_placeholder(v: &str) -> bool {
    let v = v.trim_end_matches(['.', ':', '!', '?']);
    let lower = v.to_ascii_lowercase();
    if v.is_empty()
        || v.starts_with(['$', '<', '{', '%', '*', '[', '/', '~', '…'])
        || v.starts_with("./")
        || v.contains('(')
        || v.contains("://")
        || lower.starts_with("process.env")
        || lower.starts_with("os.environ")
        || lower.starts_with("env.")
        || lower.starts_with("env[")
        || lower.starts_with("secrets.")
        || lower.starts_with("vault:")
    {
        return true;
    }
    let mut chars = v.chars();
    let first = chars.next();
    if v.chars().count() >= 3 && chars.all(|c| Some(c) == first) {
        return true; // a mask: `xxxx`, `****`, `....`
    }
    matches!(
        lower.as_str(),
        "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "nil" | "none" | "required"
    )
}

/// Whether a value looks random rather than like a word: a digit, a symbol, or an uppercase
/// letter after the first character.
fn looks_random(v: &str) -> bool {
    v.chars()
        .enumerate()
        .any(|(i, c)| c.is_ascii_digit() || (!c.is_alphanumeric()) || (i > 0 && c.is_uppercase()))
}

/// Whether an assignment match is a credential. `password = x`, `wifi password: letmein` and
/// `token=abc` are; `secret: rotation happens monthly` (prose continues after a plain word),
/// `api_key: ${KEY}` (a lookup) and `pwd: /src/app` (a path) are not.
fn assignment_is_secret(text: &str, c: &regex::Captures<'_>) -> bool {
    let (Some(sep), Some(quote), Some(value)) = (c.get(1), c.get(2), c.get(3)) else {
        return false;
    };
    let v = value.as_str();
    if is_placeholder(v) {
        return false;
    }
    if !quote.as_str().is_empty() || sep.as_str().trim() == "=" && sep.as_str().len() == 1 {
        return true; // quoted values and tight `key=value` are code, not prose
    }
    // Prose continues after the value ("secret: rotation happens monthly"): a credential only
    // when the value itself looks random.
    let rest = &text[value.end()..];
    let line_rest = rest.split('\n').next().unwrap_or("");
    let prose_follows = line_rest.starts_with([' ', '\t'])
        && line_rest
            .trim_start()
            .starts_with(|ch: char| ch.is_alphabetic());
    !prose_follows || looks_random(v)
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
            let hit = match p.confirm {
                Confirm::Shape => p.regex.is_match(text),
                Confirm::Value => p
                    .regex
                    .captures_iter(text)
                    .any(|c| c.get(1).is_some_and(|m| !is_placeholder(m.as_str()))),
                Confirm::Assignment => p
                    .regex
                    .captures_iter(text)
                    .any(|c| assignment_is_secret(text, &c)),
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

impl SecretFilter {
    /// Every credential-shaped span of `text` (byte ranges, sorted, not overlapping) and the
    /// name of the pattern that found it: the whole match for a token shape, only the value for
    /// an assignment or a connection-string password. The spans [`SecretFilter::find`] would
    /// report; used to redact text that is already stored.
    pub fn spans(text: &str) -> Vec<(std::ops::Range<usize>, &'static str)> {
        let mut spans: Vec<(std::ops::Range<usize>, &'static str)> = Vec::new();
        for p in patterns() {
            match p.confirm {
                Confirm::Shape => {
                    spans.extend(p.regex.find_iter(text).map(|m| (m.range(), p.name)));
                }
                Confirm::Value => spans.extend(p.regex.captures_iter(text).filter_map(|c| {
                    c.get(1)
                        .filter(|m| !is_placeholder(m.as_str()))
                        .map(|m| (m.range(), p.name))
                })),
                Confirm::Assignment => spans.extend(
                    p.regex
                        .captures_iter(text)
                        .filter(|c| assignment_is_secret(text, c))
                        .filter_map(|c| c.get(3).map(|m| (m.range(), p.name))),
                ),
            }
        }
        spans.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
        let mut merged: Vec<(std::ops::Range<usize>, &'static str)> = Vec::new();
        for (r, name) in spans {
            match merged.last_mut() {
                Some((last, _)) if r.start < last.end => last.end = last.end.max(r.end),
                _ => merged.push((r, name)),
            }
        }
        merged
    }
}
