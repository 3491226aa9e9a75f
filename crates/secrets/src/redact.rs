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

    /// A credential found with invisible characters, a line break or a word glued before it is
    /// redacted over its whole span as written (what is inside it included); every other byte
    /// of the text, multi-byte letters and invisible characters outside it included, is kept.
    #[test]
    fn split_and_glued_credentials_are_redacted_whole_and_nothing_else() {
        const AWS: &str = "[redacted: AWS access key id]";
        for (text, shown) in [
            (
                "Привет, 世界! AKIA\u{200B}IOSFODNN7EXAMPLE — déjà vu.",
                format!("Привет, 世界! {AWS} — déjà vu."),
            ),
            (
                "é\u{200B} AKIAIOSF\u{200C}\u{FEFF}ODNN7EXAMPLE\u{200D} ß",
                format!("é\u{200B} {AWS}\u{200D} ß"),
            ),
            (
                "Запомни:\nAKIAIOSF\r\n    ODNN7EXAMPLE\n再见，朋友。",
                format!("Запомни:\n{AWS}\n再见，朋友。"),
            ),
            (
                "配置 tokenAKIAIOSFODNN7EXAMPLE 完",
                format!("配置 token{AWS} 完"),
            ),
            (
                "我的 x_AKIA\u{00AD}IOSF\nODNN7EXAMPLE готово",
                format!("我的 x_{AWS} готово"),
            ),
            // The part before the line break alone is a token (`sk-` and sixteen characters):
            // the part after it goes too.
            (
                "Ключ: café sk-ant-api03-Qm4Zr8TnWx6\nYb1Vc9Lp5Hd3Kf7Gs0Jt, merci",
                "Ключ: café [redacted: API key (sk-...)], merci".to_owned(),
            ),
            (
                "ghp_R7tK\u{2060}2mQ9wW4vB8nL3pZ6yH1cJ5fD0gS2aE7u and\nwJalrXUtnFEMI/K7MDEN\n  G/bPxRfiCY3XAMPLEK2Y ok",
                "[redacted: GitHub token] and\n[redacted: AWS secret access key] ok".to_owned(),
            ),
        ] {
            let (out, n) = redact_secrets(text);
            assert_eq!(out, shown, "{text:?}");
            assert!(n >= 1);
            assert!(!out.contains("IOSF") && !out.contains("ODNN7"), "{out}");
        }
    }
}
