//! An injectable view of the environment.
//!
//! Library code never reads the process environment behind the caller's back: it takes an
//! [`EnvVars`], which hosts build with [`EnvVars::from_process`] and tests build from a map, so
//! tests never mutate the process environment. The switches themselves are named by the crates
//! that read them (`memloop_paths::env`, `memloop_compact`'s config).

use std::collections::BTreeMap;
use std::path::PathBuf;

/// Parse a boolean switch: `1/true/yes/on` → `Some(true)`, `0/false/no/off` → `Some(false)`
/// (case-insensitive, surrounding whitespace ignored), anything else → `None`.
///
/// ```
/// use memloop_host::env::parse_bool_env;
/// assert_eq!(parse_bool_env(" YES "), Some(true));
/// assert_eq!(parse_bool_env("Off"), Some(false));
/// assert_eq!(parse_bool_env("maybe"), None);
/// ```
pub fn parse_bool_env(value: &str) -> Option<bool> {
    match value.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Some(true),
        "0" | "false" | "no" | "off" => Some(false),
        _ => None,
    }
}

/// Whether an optional switch value is truthy (unset, falsy or unrecognised → `false`).
///
/// ```
/// use memloop_host::env::is_truthy;
/// assert!(is_truthy(Some("on")));
/// assert!(!is_truthy(Some("garbage")));
/// assert!(!is_truthy(None));
/// ```
pub fn is_truthy(value: Option<&str>) -> bool {
    value.and_then(parse_bool_env).unwrap_or(false)
}

/// A snapshot of environment variables.
///
/// ```
/// use memloop_host::env::EnvVars;
/// let env = EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "true"), ("HOME", "/home/a")]);
/// assert!(env.switch("MEMLOOP_DISABLE_AUTO_MEMORY"));
/// assert_eq!(env.home_dir().unwrap(), std::path::PathBuf::from("/home/a"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnvVars {
    vars: BTreeMap<String, String>,
}

impl EnvVars {
    /// The current process environment (non-UTF-8 entries are skipped).
    pub fn from_process() -> Self {
        Self {
            vars: std::env::vars_os()
                .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
                .collect(),
        }
    }

    /// An environment made of the given pairs (for tests and embedding hosts).
    pub fn from_pairs<K: Into<String>, V: Into<String>>(
        pairs: impl IntoIterator<Item = (K, V)>,
    ) -> Self {
        Self {
            vars: pairs
                .into_iter()
                .map(|(k, v)| (k.into(), v.into()))
                .collect(),
        }
    }

    /// Set one variable (builder style).
    pub fn with(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.vars.insert(key.into(), value.into());
        self
    }

    /// A variable's value; empty values count as unset.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.vars
            .get(key)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    /// The user's home dir (`HOME`, else `USERPROFILE`).
    pub fn home_dir(&self) -> Option<PathBuf> {
        self.get("HOME")
            .or_else(|| self.get("USERPROFILE"))
            .map(PathBuf::from)
    }

    /// A boolean switch: `true` when `key` is truthy; unset or falsy is `false`; an
    /// unrecognised value is `false` too, with a warning naming the variable and the accepted
    /// values (never silently ignored).
    ///
    /// ```
    /// use memloop_host::env::EnvVars;
    /// let env = EnvVars::from_pairs([("A", "on"), ("B", "maybe")]);
    /// assert!(env.switch("A"));
    /// assert!(!env.switch("B")); // logs a warning
    /// ```
    pub fn switch(&self, key: &str) -> bool {
        match self.get(key) {
            None => false,
            Some(v) => parse_bool_env(v).unwrap_or_else(|| {
                tracing::warn!(
                    variable = key,
                    value = v,
                    "unrecognised switch value ignored (use 1/true/yes/on or 0/false/no/off)"
                );
                false
            }),
        }
    }
}
