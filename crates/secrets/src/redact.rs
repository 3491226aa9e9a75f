//! Redaction of credential-shaped text that is already stored (hand-written memory files): what
//! leaves the process (MCP answers, recalled text sent to a model provider) carries a marker in
//! place of each credential, never the credential.

use crate::filter::SecretFilter;

/// The marker that replaces a credential: `[redacted: <pattern name>]`.
pub const REDACTED_PREFIX: &str = "[redacted: ";

/// `text` with every credential-shaped span ([`SecretFilter::spans`]) replaced by
/// `[redacted: <pattern name>]`, and how many were replaced. Text without any is returned as is.
///
/// ```
/// use memloop_secrets::redact_secrets;
/// let (out, n) = redact_secrets("token ghp_abcdefghijklmnopqrstuvwxyz0123456789 here");
/// assert_eq!(n, 1);
/// assert!(out.contains("[redacted: ") && !out.contains("ghp_abc"));
/// assert_eq!(redact_secrets("nothing secret").1, 0);
/// ```
pub fn redact_secrets(text: &str) -> (String, usize) {
    let spans = SecretFilter::spans(text);
    if spans.is_empty() {
        return (text.to_owned(), 0);
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (range, name) in &spans {
        out.push_str(&text[at..range.start]);
        out.push_str(REDACTED_PREFIX);
        out.push_str(name);
        out.push(']');
        at = range.end;
    }
    out.push_str(&text[at..]);
    tracing::debug!(count = spans.len(), "credential-shaped text redacted");
    (out, spans.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Credentials written in other languages, in prose, and in fullwidth letters are redacted
    /// too: whatever the write path refuses, the read path withholds.
    #[test]
    fn every_language_prose_and_fullwidth_are_redacted() {
        for (text, secret) in [
            ("生产数据库密码是 S3cr3tPass2024", "S3cr3tPass2024"),
            ("パスワード: Hunter2Secret!", "Hunter2Secret!"),
            ("비밀번호: Xk9#mQ2vLp", "Xk9#mQ2vLp"),
            ("Пароль: Zt7$uPq91w", "Zt7$uPq91w"),
            ("the password is Tr0ub4dor&3x", "Tr0ub4dor&3x"),
            ("note\nｐａｓｓｗｏｒｄ = hunter2xyz\nend", "hunter2xyz"),
        ] {
            assert!(SecretFilter::find(text).is_some(), "not a secret? {text}");
            let (out, n) = redact_secrets(text);
            assert!(n >= 1, "{text}");
            assert!(!out.contains(secret), "{secret} leaked in {out}");
            assert!(out.contains(REDACTED_PREFIX), "{out}");
        }
        let (out, n) = redact_secrets("note\nｐａｓｓｗｏｒｄ = hunter2xyz\nend");
        assert_eq!(
            (n, out.starts_with("note\n"), out.ends_with("\nend")),
            (1, true, true)
        );
    }
}
