//! The sensitive-data filter: content that looks like a credential is refused
//! with an error naming the pattern, never the secret.

use crate::labels;
use regex::Regex;
use std::borrow::Cow;
use std::ops::Range;
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
    /// The match alone is a credential (a well-known token shape, a key block), unless it is a
    /// documentation mask (`ghp_XXXX…`).
    Shape,
    /// A token shape whose prefix also begins ordinary words (`sk-`): it must mix letters and
    /// digits.
    Mixed,
    /// Group 1 is a 40-character base64 run: an AWS secret key when it mixes capitals, small
    /// letters and digits.
    AwsSecret,
    /// An assignment: group 1 is the separator, group 2 an opening quote, group 3 the value; the
    /// value must not be a placeholder and, when prose follows it, must look random.
    Assignment,
    /// Group 1 is a value that must not be a placeholder (connection-string passwords, flags).
    Value,
}

impl Confirm {
    /// Whether `m`, the match of a token shape or group 1 of a value pattern, is a credential.
    /// An assignment is judged on all its groups ([`assignment_is_secret`]), not here.
    fn accepts(self, m: &str) -> bool {
        match self {
            Self::Shape => !is_masked(m),
            Self::Mixed => !is_masked(m) && mixed(m),
            Self::AwsSecret => aws_secret(m),
            Self::Value => !is_placeholder(m),
            Self::Assignment => true,
        }
    }
}

/// Credential-like keys: the key may carry a prefix (`DB_PASSWORD`, `github.token`,
/// `AWS_SECRET_ACCESS_KEY`) but must end with the credential word.
const KEY: &str = r"[A-Za-z0-9_.-]*(?:password|passwd|passphrase|passcode|pwd|secret|token|(?:api|secret|access|private|account|signing|encryption|master)[_ -]?key|apikey|client[_-]?secret|credentials?)|(?:[A-Za-z0-9_.-]*[_.-])?(?:pass|pw|psw|pword)";

fn assignment() -> String {
    // key, optional closing quote of a quoted key, separator (`=`, `:`, `:=`, `=>`), optional
    // opening quote, value.
    format!(
        r#"(?i)(?:^|[^A-Za-z0-9_.-])(?:{KEY})["']?([ \t]*(?::=|=>|==?|:)[ \t]*)(["'`]?)([^\s"'`,;)\]}}>]+)"#
    )
}

/// Vendor token families found by their prefix alone (each a [`Confirm::Shape`]), in the order
/// they are tried.
const VENDOR_TOKENS: &[(&str, &str)] = &[
    (
        "Stripe secret key",
        r"(?-u:\b)[sr]k_(?:live|test)_[A-Za-z0-9]{6,}",
    ),
    ("Google API key", r"(?-u:\b)AIza[0-9A-Za-z_-]{20,}"),
    ("npm token", r"(?-u:\b)npm_[A-Za-z0-9]{30,}(?-u:\b)"),
    ("PyPI token", r"(?-u:\b)pypi-AgE[A-Za-z0-9_-]{40,}"),
    ("Hugging Face token", r"(?-u:\b)hf_[A-Za-z0-9]{24,}(?-u:\b)"),
    (
        "SendGrid key",
        r"(?-u:\b)SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
    ),
    (
        "DigitalOcean token",
        r"(?-u:\b)do[opr]_v1_[a-f0-9]{48,}(?-u:\b)",
    ),
    (
        "Shopify token",
        r"(?-u:\b)shp(?:at|ca|pa|ss)_[a-fA-F0-9]{24,}(?-u:\b)",
    ),
    ("Mailgun key", r"(?-u:\b)key-[0-9a-f]{32}(?-u:\b)"),
    (
        "Telegram bot token",
        r"(?-u:\b)\d{8,10}:AA[A-Za-z0-9_-]{30,}(?-u:\b)",
    ),
    (
        "Google OAuth token or client secret",
        r"(?-u:\b)ya29\.[0-9A-Za-z_-]{20,}|(?-u:\b)GOCSPX-[A-Za-z0-9_-]{20,}",
    ),
    (
        "Stripe webhook secret",
        r"(?-u:\b)whsec_[A-Za-z0-9+/=]{16,}",
    ),
    ("Slack app token", r"(?-u:\b)xapp-\d-[A-Za-z0-9-]{20,}"),
    (
        "Notion token",
        r"(?-u:\b)(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})(?-u:\b)",
    ),
    (
        "Linear API key",
        r"(?-u:\b)lin_api_[A-Za-z0-9]{32,}(?-u:\b)",
    ),
    (
        "HashiCorp Vault token",
        r"(?-u:\b)hv[sbr]\.[A-Za-z0-9_-]{24,}",
    ),
    (
        "Doppler token",
        r"(?-u:\b)dp\.(?:pt|st|ct|sa)\.[A-Za-z0-9]{40,}",
    ),
    ("Grafana token", r"(?-u:\b)gl(?:sa|c)_[A-Za-z0-9_+/=-]{32,}"),
    ("New Relic key", r"(?-u:\b)NRAK-[A-Z0-9]{27}(?-u:\b)"),
    (
        "Postman key",
        r"(?-u:\b)PMAK-[a-f0-9]{24}-[a-f0-9]{34}(?-u:\b)",
    ),
    (
        "age secret key",
        r"(?-u:\b)AGE-SECRET-KEY-1[0-9A-Z]{58}(?-u:\b)",
    ),
    (
        "Groq / xAI / Replicate key",
        r"(?-u:\b)(?:gsk_[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{60,}|r8_[A-Za-z0-9]{30,})(?-u:\b)",
    ),
    ("Databricks token", r"(?-u:\b)dapi[a-f0-9]{32}(?-u:\b)"),
];

fn patterns() -> &'static [SecretPattern] {
    static PATTERNS: OnceLock<Vec<SecretPattern>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let assignment = assignment();
        // Vendor token families are found by their prefix with a tolerant length: a token a few
        // characters shorter or longer than the canonical one is still that token.
        let leading: [(&'static str, &str, Confirm); 9] = [
            (
                "private key block",
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n[A-Za-z0-9+/=]+)*)|PuTTY-User-Key-File-\d[^\n]*(?:\n[^\n]+)*",
                Confirm::Shape,
            ),
            ("AWS access key id", r"(?-u:\b)(?:AKIA|ASIA)[0-9A-Z]{12,24}(?-u:\b)", Confirm::Shape),
            (
                "GitHub token",
                r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,})",
                Confirm::Shape,
            ),
            ("GitLab token", r"(?-u:\b)glpat-[A-Za-z0-9_-]{14,}", Confirm::Shape),
            (
                "JSON Web Token",
                r"(?-u:\b)eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
                Confirm::Shape,
            ),
            ("Slack token", r"(?-u:\b)xox[abposre]-[A-Za-z0-9-]{8,}", Confirm::Shape),
            (
                "Slack webhook",
                r"hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
                Confirm::Shape,
            ),
            (
                "API key (sk-...)",
                r"(?-u:\b)sk-(?:ant-(?:api\d\d-|admin\d\d-)?|proj-|svcacct-|admin-)[A-Za-z0-9_-]{16,}",
                Confirm::Shape,
            ),
            ("API key (sk-...)", r"(?-u:\b)sk-[A-Za-z0-9_-]{16,}", Confirm::Mixed),
        ];
        let vendor = VENDOR_TOKENS
            .iter()
            .map(|&(name, re)| (name, re, Confirm::Shape));
        let trailing = [
            // After the vendor families: the body of a `ghp_…` token is not an AWS secret key.
            (
                "AWS secret access key",
                r"(?:^|[^A-Za-z0-9/+=_-])([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=_-]|$)",
                Confirm::AwsSecret,
            ),
            (
                "bearer token",
                r"(?i)(?-u:\b)bearer[ \t]+[A-Za-z0-9._~+/=-]{20,}",
                Confirm::Shape,
            ),
            (
                "basic auth header",
                r"(?i)(?-u:\b)authorization:[ \t]*basic[ \t]+[A-Za-z0-9+/]{8,}=*",
                Confirm::Shape,
            ),
            (
                "connection string with password (scheme://user:password@host)",
                r"(?i)(?-u:\b)[a-z][a-z0-9+.-]*://[^\s:/@]*:([^\s/@]+)@",
                Confirm::Value,
            ),
            (
                "credential flag (--password value)",
                r"(?i)(?:^|\s)--?(?:password|passwd|pass|token|api-key|apikey|auth-token|access-token|secret|client-secret)(?:=|[ \t]+)([^\s-][^\s]*)",
                Confirm::Value,
            ),
            (
                "password flag glued to its value (mysql -pVALUE)",
                r"(?i)(?-u:\b)(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump|mariadb-admin)(?-u:\b)[^\n|;&]*?[ \t]-p([^\s`-][^\s`]*)",
                Confirm::Value,
            ),
            (
                "client password argument (sshpass -p, redis-cli -a, curl -u user:pass)",
                r"(?i)(?-u:\b)(?:sshpass[ \t]+-p[ \t]*|redis-cli(?-u:\b)[^\n|;&]*?[ \t]-a[ \t]+|(?:curl|wget)(?-u:\b)[^\n|;&]*?[ \t](?:-u|--user)[ \t]+[^\s:]+:|docker[ \t]+login(?-u:\b)[^\n|;&]*?[ \t]-p[ \t]+|ldap\w+(?-u:\b)[^\n|;&]*?[ \t]-w[ \t]+|smbclient(?-u:\b)[^\n|;&]*?[ \t]-U[ \t]*[^\s%]+%)([^\s-][^\s]*)",
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
        leading
            .into_iter()
            .chain(vendor)
            .chain(trailing)
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

/// The patterns that match somewhere in `text`, found in one pass of a set of all of them
/// (every pattern asked on its own costs a pass over the text and a matcher from its pool each);
/// every pattern when the set could not be built.
fn matching_patterns(text: &str) -> impl Iterator<Item = &'static SecretPattern> {
    static SET: OnceLock<Option<regex::RegexSet>> = OnceLock::new();
    let set = SET.get_or_init(|| {
        regex::RegexSet::new(patterns().iter().map(|p| p.regex.as_str()))
            .inspect_err(|e| tracing::warn!(error = %e, "secret pattern set not built"))
            .ok()
    });
    let hits = set.as_ref().map(|set| set.matches(text));
    patterns()
        .iter()
        .enumerate()
        .filter(move |(i, _)| hits.as_ref().is_none_or(|h| h.matched(*i)))
        .map(|(_, p)| p)
}

/// Whether a token-shaped match is a mask in documentation (`ghp_XXXXXXXXXXXXXXXXXXXX`,
/// `sk_live_****`, `sk-...`) rather than a token.
fn is_masked(m: &str) -> bool {
    let lower = m.to_ascii_lowercase();
    lower.contains("xxxx") || m.contains("****") || m.contains("...") || m.contains('…')
}

/// Whether a match of a prefix family that also begins ordinary words (`sk-`, `hf_`) mixes
/// letters and digits, as a random token does.
fn mixed(m: &str) -> bool {
    m.chars().any(|c| c.is_ascii_digit()) && m.chars().filter(char::is_ascii_alphabetic).count() > 4
}

/// Whether a 40-character base64 run is an AWS secret access key: capitals, small letters and
/// digits all present (a git hash has no capitals, an identifier made of words no digits).
fn aws_secret(v: &str) -> bool {
    v.chars().any(|c| c.is_ascii_uppercase())
        && v.chars().any(|c| c.is_ascii_lowercase())
        && v.chars().filter(char::is_ascii_digit).count() >= 2
        && !is_masked(v)
}

/// Whether a value is a placeholder, reference or flag rather than a secret (see
/// [`labels::is_placeholder`]).
fn is_placeholder(v: &str) -> bool {
    labels::is_placeholder(v)
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
    // A Markdown code span holding a command (`` token: `gh auth refresh -h x` ``) is not a value.
    if quote.as_str() == "`" && text[value.end()..].starts_with([' ', '\t']) {
        return v.chars().count() >= 6 && looks_random(v);
    }
    if !quote.as_str().is_empty() || sep.as_str().trim() == "=" && sep.as_str().len() == 1 {
        return true; // quoted values and tight `key=value` are code, not prose
    }
    // Text continues after the value ("secret: rotation happens monthly", "token: gpt-4o-mini
    // context is 128k", "secret: Opaque (type …)"): a credential only when the value itself is
    // shaped like one. A value alone at the end of its line may be a plain word (`letmein`).
    let rest = &text[value.end()..];
    let line_rest = rest.split('\n').next().unwrap_or("");
    let text_follows = line_rest.starts_with([' ', '\t']) && !line_rest.trim().is_empty();
    !text_follows
        || v.chars().count() >= 4
            && looks_random(v)
            && labels::secret_shaped(v, labels::Strictness::Strong, false)
}

/// The `tracing` target of the event a refused credential raises ([`SecretFilter::check`]): its
/// field `memloop.secret.pattern` names the pattern that matched; the text is never recorded.
/// The OTLP export passes it on as a span event.
pub const SECRET_REFUSED_TARGET: &str = "memloop::secrets";

/// Checks text against the credential patterns.
///
/// ```
/// use memloop_secrets::SecretFilter;
/// assert!(SecretFilter::check("the user forgot the password reset flow").is_ok());
/// let err = SecretFilter::check("db password = hunter22").unwrap_err();
/// assert!(err.to_string().contains("credential assignment"));
/// assert!(!err.to_string().contains("hunter22"));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SecretFilter;

/// Text refused by [`SecretFilter::check`]: it looks like it holds a credential. Carries the
/// name of the pattern that matched, never the text; a store turns it into its own refusal
/// (`memloop_store::MemoryError::SensitiveData`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the text looks like it contains a secret ({pattern})")]
pub struct SecretFound {
    /// Name of the pattern that matched (e.g. `GitHub token`), never the secret.
    pub pattern: &'static str,
}

/// The credential spans one pattern finds in `text` (byte ranges): the whole match for a token
/// shape, only the value for an assignment, a flag or a connection-string password.
fn pattern_spans<'t>(
    p: &'t SecretPattern,
    text: &'t str,
) -> Box<dyn Iterator<Item = Range<usize>> + 't> {
    // The DFA answers whether there is a match at all far faster than captures are found.
    if !p.regex.is_match(text) {
        return Box::new(std::iter::empty());
    }
    match p.confirm {
        // The whole match is the credential.
        Confirm::Shape | Confirm::Mixed => Box::new(
            p.regex
                .find_iter(text)
                .filter(|m| p.confirm.accepts(m.as_str()))
                .map(|m| m.range()),
        ),
        // Group 1 is.
        Confirm::AwsSecret | Confirm::Value => {
            Box::new(p.regex.captures_iter(text).filter_map(|c| {
                c.get(1)
                    .filter(|m| p.confirm.accepts(m.as_str()))
                    .map(|m| m.range())
            }))
        }
        Confirm::Assignment => Box::new(
            p.regex
                .captures_iter(text)
                .filter(|c| assignment_is_secret(text, c))
                .filter_map(|c| c.get(3).map(|m| m.range())),
        ),
    }
}

/// `text` in Unicode compatibility form (NFKC) when it is not already, so fullwidth and other
/// compatibility characters (`ｐａｓｓｗｏｒｄ＝…`, `密码：…`) match like their ASCII forms.
///
/// Only the lines that need it are normalised: one line of Chinese with a fullwidth comma does
/// not make the whole text pay for normalisation.
fn nfkc(text: &str) -> Cow<'_, str> {
    use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfkc_quick};
    let normal = |s: &str| matches!(is_nfkc_quick(s.chars()), IsNormalized::Yes);
    if normal(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        if normal(line) {
            out.push_str(line);
        } else {
            out.extend(line.nfkc());
        }
    }
    Cow::Owned(out)
}

impl SecretFilter {
    /// The name of the first pattern that matches, if any.
    ///
    /// Two kinds of rule decide. Token shapes: vendor token families by their prefix with a
    /// tolerant length (GitHub, GitLab, Slack, Stripe, AWS, OpenAI, Anthropic, Google, JWTs,
    /// private key blocks, …), command lines that carry a password (`mysql -pX`,
    /// `--password=X`) and URLs with a password in them. And one structural rule: a credential
    /// word of any language the filter knows (`password`, `密码`, `口令`, `пароль`, `heslo`,
    /// `κωδικός πρόσβασης`, …), a short qualifier (`пароль администратора`, `token dostępu do
    /// API`), a separator or copula (`:` `=` `—` `is` `是` `ist` `je` `είναι` …), then a value
    /// shaped like a secret: not a placeholder, an environment-variable reference, a vault path
    /// or a word.
    ///
    /// The text is matched in Unicode compatibility form (NFKC), so fullwidth and other
    /// compatibility characters (`ｐａｓｓｗｏｒｄ＝…`, `密码：…`) match like their ASCII forms.
    pub fn find(text: &str) -> Option<&'static str> {
        let text = nfkc(text);
        let text = text.as_ref();
        matching_patterns(text)
            .find(|p| pattern_spans(p, text).next().is_some())
            .map(|p| p.name)
            .or_else(|| (!labels::find_values(text, true).is_empty()).then_some(labels::NAME))
    }

    /// [`SecretFound`] naming the pattern when `text` looks like it holds a credential, and a
    /// warning event on [`SECRET_REFUSED_TARGET`] naming the pattern (never the text).
    pub fn check(text: &str) -> Result<(), SecretFound> {
        match Self::find(text) {
            Some(pattern) => {
                // The one place a refusal is decided, so the one event hosts and traces see
                // (an OpenTelemetry span event on the tool call or extraction that wrote).
                tracing::event!(
                    target: SECRET_REFUSED_TARGET,
                    tracing::Level::WARN,
                    { "memloop.secret.pattern" } = pattern,
                    "memory write refused: looks like a credential"
                );
                Err(SecretFound { pattern })
            }
            None => Ok(()),
        }
    }

    /// Every credential-shaped span of `text` (byte ranges, sorted, not overlapping) and the
    /// name of the pattern that found it: the whole match for a token shape, only the value for
    /// an assignment or a connection-string password. The spans [`SecretFilter::find`] would
    /// report; used to redact text that is already stored.
    ///
    /// Text with compatibility characters (fullwidth letters, ...) is matched in its NFKC form,
    /// as [`SecretFilter::find`] does; since those byte ranges do not map back onto the text,
    /// each line holding a credential is then one span.
    pub fn spans(text: &str) -> Vec<(Range<usize>, &'static str)> {
        if let Cow::Owned(_) = nfkc(text) {
            let mut out = Vec::new();
            let mut start = 0;
            for line in text.split_inclusive('\n') {
                let body = line.trim_end_matches(['\n', '\r']);
                if let Some(name) = Self::find(body) {
                    out.push((start..start + body.len(), name));
                }
                start += line.len();
            }
            return out;
        }
        let mut spans: Vec<(Range<usize>, &'static str)> = Vec::new();
        for p in matching_patterns(text) {
            spans.extend(pattern_spans(p, text).map(|r| (r, p.name)));
        }
        spans.extend(
            labels::find_values(text, false)
                .into_iter()
                .map(|r| (r, labels::NAME)),
        );
        spans.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
        let mut merged: Vec<(Range<usize>, &'static str)> = Vec::new();
        for (r, name) in spans {
            match merged.last_mut() {
                Some((last, _)) if r.start < last.end => last.end = last.end.max(r.end),
                _ => merged.push((r, name)),
            }
        }
        merged
    }
}
