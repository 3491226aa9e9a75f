//! The sensitive-data filter: content that looks like a credential is refused
//! with an error naming the pattern, never the secret.

use crate::labels;
use crate::view;
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
    left: Left,
}

/// What may come right before a token's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Left {
    /// What the regex says: a word boundary, where it starts with one. The prefix (`sk-`, `hf_`,
    /// `key-`, `secret_`) also ends ordinary words (`risk-`, `half_`, `monkey-`, `client_`).
    AsWritten,
    /// Anything. The prefix is distinctive enough (`AKIA`, `ghp_`, `glpat-`, `xoxb-`, `AIza`)
    /// that it starts a token wherever it stands, glued after letters, digits or `_` too
    /// (`tokenAKIA…`, `my_ghp_…`): gluing a token to a word must not hide it. A capital prefix
    /// glued after a capital may be the inside of a word in capitals (`EURASIANECONOMICUNION`):
    /// there the token must look random.
    Glued,
    /// Anything, but a token glued after a letter, digit or `_` counts only when it looks
    /// random: the prefix also ends ordinary words in kebab or snake case
    /// (`task-proj-management-2024`, `network_live_stream2024`).
    GluedIfRandom,
}

impl Left {
    /// Whether the match `m` of `text` is accepted for what stands before it. A token "looks
    /// random" as a value without any label must ([`labels::Strictness::Strict`]).
    fn accepts(self, text: &str, m: &regex::Match<'_>) -> bool {
        let Some(before) = text[..m.start()].bytes().next_back() else {
            return true;
        };
        let glued = before.is_ascii_alphanumeric() || before == b'_';
        let random = || labels::secret_shaped(m.as_str(), labels::Strictness::Strict, false);
        match self {
            Self::AsWritten => true,
            Self::Glued => {
                !(before.is_ascii_uppercase()
                    && m.as_str().starts_with(|c: char| c.is_ascii_uppercase()))
                    || random()
            }
            Self::GluedIfRandom => !glued || random(),
        }
    }
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
/// they are tried, and what may stand before the prefix ([`Left`]): a regex of a prefix that may
/// be glued after a word has no word boundary before it.
const VENDOR_TOKENS: &[(&str, &str, Left)] = &[
    (
        "Stripe secret key",
        r"[sr]k_(?:live|test)_[A-Za-z0-9]{6,}",
        Left::GluedIfRandom,
    ),
    ("Google API key", r"AIza[0-9A-Za-z_-]{20,}", Left::Glued),
    ("npm token", r"npm_[A-Za-z0-9]{30,}(?-u:\b)", Left::Glued),
    ("PyPI token", r"pypi-AgE[A-Za-z0-9_-]{40,}", Left::Glued),
    (
        "Hugging Face token",
        r"hf_[A-Za-z0-9]{24,}(?-u:\b)",
        Left::GluedIfRandom,
    ),
    (
        "SendGrid key",
        r"(?-u:\b)SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}",
        Left::AsWritten,
    ),
    (
        "DigitalOcean token",
        r"do[opr]_v1_[a-f0-9]{48,}(?-u:\b)",
        Left::Glued,
    ),
    (
        "Shopify token",
        r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{24,}(?-u:\b)",
        Left::Glued,
    ),
    (
        "Mailgun key",
        r"(?-u:\b)key-[0-9a-f]{32}(?-u:\b)",
        Left::AsWritten,
    ),
    (
        "Telegram bot token",
        r"(?-u:\b)\d{8,10}:AA[A-Za-z0-9_-]{30,}(?-u:\b)",
        Left::AsWritten,
    ),
    (
        "Google OAuth token or client secret",
        r"ya29\.[0-9A-Za-z_-]{20,}|GOCSPX-[A-Za-z0-9_-]{20,}",
        Left::Glued,
    ),
    (
        "Stripe webhook secret",
        r"whsec_[A-Za-z0-9+/=]{16,}",
        Left::Glued,
    ),
    ("Slack app token", r"xapp-\d-[A-Za-z0-9-]{20,}", Left::Glued),
    (
        "Notion token",
        r"(?-u:\b)(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})(?-u:\b)",
        Left::AsWritten,
    ),
    (
        "Linear API key",
        r"lin_api_[A-Za-z0-9]{32,}(?-u:\b)",
        Left::Glued,
    ),
    (
        "HashiCorp Vault token",
        r"(?-u:\b)hv[sbr]\.[A-Za-z0-9_-]{24,}",
        Left::AsWritten,
    ),
    (
        "Doppler token",
        r"(?-u:\b)dp\.(?:pt|st|ct|sa)\.[A-Za-z0-9]{40,}",
        Left::AsWritten,
    ),
    (
        "Grafana token",
        r"(?-u:\b)gl(?:sa|c)_[A-Za-z0-9_+/=-]{32,}",
        Left::AsWritten,
    ),
    ("New Relic key", r"NRAK-[A-Z0-9]{27}(?-u:\b)", Left::Glued),
    (
        "Postman key",
        r"PMAK-[a-f0-9]{24}-[a-f0-9]{34}(?-u:\b)",
        Left::Glued,
    ),
    (
        "age secret key",
        r"AGE-SECRET-KEY-1[0-9A-Z]{58}(?-u:\b)",
        Left::Glued,
    ),
    (
        "Groq / xAI / Replicate key",
        r"(?-u:\b)(?:gsk_[A-Za-z0-9]{40,}|xai-[A-Za-z0-9]{60,}|r8_[A-Za-z0-9]{30,})(?-u:\b)",
        Left::AsWritten,
    ),
    (
        "Databricks token",
        r"(?-u:\b)dapi[a-f0-9]{32}(?-u:\b)",
        Left::AsWritten,
    ),
];

fn patterns() -> &'static [SecretPattern] {
    static PATTERNS: OnceLock<Vec<SecretPattern>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let assignment = assignment();
        // Vendor token families are found by their prefix with a tolerant length: a token a few
        // characters shorter or longer than the canonical one is still that token.
        let leading: [(&'static str, &str, Confirm, Left); 9] = [
            (
                "private key block",
                r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----(?:[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----|(?:\r?\n[A-Za-z0-9+/=]+)*)|PuTTY-User-Key-File-\d[^\n]*(?:\n[^\n]+)*",
                Confirm::Shape,
                Left::AsWritten,
            ),
            (
                "AWS access key id",
                r"(?:AKIA|ASIA)[0-9A-Z]{12,24}(?-u:\b)",
                Confirm::Shape,
                Left::Glued,
            ),
            (
                "GitHub token",
                r"gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}",
                Confirm::Shape,
                Left::Glued,
            ),
            ("GitLab token", r"glpat-[A-Za-z0-9_-]{14,}", Confirm::Shape, Left::Glued),
            (
                "JSON Web Token",
                r"eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
                Confirm::Shape,
                Left::GluedIfRandom,
            ),
            ("Slack token", r"xox[abposre]-[A-Za-z0-9-]{8,}", Confirm::Shape, Left::Glued),
            (
                "Slack webhook",
                r"hooks\.slack\.com/services/T[A-Za-z0-9]+/B[A-Za-z0-9]+/[A-Za-z0-9]+",
                Confirm::Shape,
                Left::AsWritten,
            ),
            (
                "API key (sk-...)",
                r"sk-(?:ant-(?:api\d\d-|admin\d\d-)?|proj-|svcacct-|admin-)[A-Za-z0-9_-]{16,}",
                Confirm::Shape,
                Left::GluedIfRandom,
            ),
            (
                "API key (sk-...)",
                r"(?-u:\b)sk-[A-Za-z0-9_-]{16,}",
                Confirm::Mixed,
                Left::AsWritten,
            ),
        ];
        let vendor = VENDOR_TOKENS
            .iter()
            .map(|&(name, re, left)| (name, re, Confirm::Shape, left));
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
        let trailing = trailing
            .into_iter()
            .map(|(name, re, confirm)| (name, re, confirm, Left::AsWritten));
        leading
            .into_iter()
            .chain(vendor)
            .chain(trailing)
            .filter_map(|(name, re, confirm, left)| match Regex::new(re) {
                Ok(regex) => Some(SecretPattern {
                    name,
                    regex,
                    confirm,
                    left,
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
    matching(&SET, |_| true, text)
}

/// Whether a pattern is a token shape: its match alone is the credential, whatever the lines
/// around it say. Only these read the text with its lines joined ([`view::joined`]).
fn is_token_shape(p: &SecretPattern) -> bool {
    matches!(
        p.confirm,
        Confirm::Shape | Confirm::Mixed | Confirm::AwsSecret
    )
}

/// The token shapes ([`is_token_shape`]) that match somewhere in `text`, found in one pass of a
/// set of them.
fn matching_token_shapes(text: &str) -> impl Iterator<Item = &'static SecretPattern> {
    static SET: OnceLock<Option<regex::RegexSet>> = OnceLock::new();
    matching(&SET, is_token_shape, text)
}

/// The patterns chosen by `chosen` that match somewhere in `text`, found in one pass of `set`
/// (built once, of the chosen patterns); every chosen pattern when the set could not be built.
fn matching(
    set: &'static OnceLock<Option<regex::RegexSet>>,
    chosen: fn(&SecretPattern) -> bool,
    text: &str,
) -> impl Iterator<Item = &'static SecretPattern> {
    let set = set.get_or_init(|| {
        regex::RegexSet::new(
            patterns()
                .iter()
                .filter(|p| chosen(p))
                .map(|p| p.regex.as_str()),
        )
        .inspect_err(|e| tracing::warn!(error = %e, "secret pattern set not built"))
        .ok()
    });
    let hits = set.as_ref().map(|set| set.matches(text));
    patterns()
        .iter()
        .filter(move |p| chosen(p))
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
                .filter(|m| p.confirm.accepts(m.as_str()) && p.left.accepts(text, m))
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

/// The token-shaped credentials the text read with its lines joined holds across a joined line
/// break (spans of the reading's text): the ones a line break split. Each window of the reading
/// ([`view::Joined::windows`]) is matched on its own, so a closed line break is also tried as
/// the token's start or end; a match that does not run across one is one the text as written
/// holds as well (or, when only its line was joined to another, not a credential at all), so
/// joining lines never makes a credential of its own.
fn joined_spans<'r>(
    joined: &'r view::Joined<'_>,
) -> impl Iterator<Item = (Range<usize>, &'static str)> + 'r {
    let read = &joined.reading;
    joined.windows.iter().flat_map(move |w| {
        let window = read.text().get(w.clone()).unwrap_or("");
        let offset = w.start;
        matching_token_shapes(window).flat_map(move |p| {
            pattern_spans(p, window)
                .map(move |r| r.start + offset..r.end + offset)
                .filter(|r| read.cut_inside(r))
                .map(move |r| (r, p.name))
        })
    })
}

/// The name of the first pattern that matches `text`, read as it is (no invisible characters in
/// it, its lines as they are).
fn find_in(text: &str) -> Option<&'static str> {
    let text = nfkc(text);
    let text = text.as_ref();
    matching_patterns(text)
        .find(|p| pattern_spans(p, text).next().is_some())
        .map(|p| p.name)
        .or_else(|| (!labels::find_values(text, true).is_empty()).then_some(labels::NAME))
}

/// The credential spans of `text` read as it is (no invisible characters in it, its lines as
/// they are), sorted by start, not merged.
fn spans_in(text: &str) -> Vec<(Range<usize>, &'static str)> {
    // Spans in the NFKC form do not map back onto the text: each line holding a credential is
    // then one span.
    if !is_nfkc(text) {
        let mut out = Vec::new();
        let mut start = 0;
        for line in text.split_inclusive('\n') {
            let body = line.trim_end_matches(['\n', '\r']);
            if let Some(name) = find_in(body) {
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
    spans
}

/// `text` in Unicode compatibility form (NFKC) when it is not already, so fullwidth and other
/// compatibility characters (`ｐａｓｓｗｏｒｄ＝…`, `密码：…`) match like their ASCII forms.
///
/// Only the lines that need it are normalised: one line of Chinese with a fullwidth comma does
/// not make the whole text pay for normalisation.
fn nfkc(text: &str) -> Cow<'_, str> {
    use unicode_normalization::UnicodeNormalization;
    if is_nfkc(text) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for line in text.split_inclusive('\n') {
        if is_nfkc(line) {
            out.push_str(line);
        } else {
            out.extend(line.nfkc());
        }
    }
    Cow::Owned(out)
}

/// Whether `text` is in NFKC form, by the quick check, run on its non-ASCII runs only: an ASCII
/// character is its own form and resets the check's state (combining class 0), so a run after
/// one is checked as a text of its own, and the table lookups the check makes per character are
/// spent where they can matter.
fn is_nfkc(text: &str) -> bool {
    use unicode_normalization::{IsNormalized, is_nfkc_quick};
    let mut rest = text;
    // A non-ASCII byte after ASCII ones starts a character, and so does an ASCII byte.
    while let Some(start) = rest.bytes().position(|b| !b.is_ascii()) {
        let run = rest.get(start..).unwrap_or_default();
        let end = run.bytes().position(|b| b.is_ascii()).unwrap_or(run.len());
        let (chars, after) = run.split_at_checked(end).unwrap_or((run, ""));
        if !matches!(is_nfkc_quick(chars.chars()), IsNormalized::Yes) {
            return false;
        }
        rest = after;
    }
    true
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
    /// The text is read the way whoever copies a credential out of it would read it:
    /// - without the characters that render as nothing (zero-width space, joiners, soft hyphen,
    ///   bidirectional controls, byte order mark, …), so `AKIA`, U+200B, `IOSFODNN7EXAMPLE` is
    ///   one key;
    /// - with a line break inside a token closed, for the token shapes only: a key whose
    ///   characters go on on the next line (`AKIAIOSF` / `ODNN7EXAMPLE`) is found, and a match
    ///   counts there only when it runs across such a line break, so wrapped prose is not;
    /// - with a distinctive token prefix found glued after a word (`tokenAKIA…`, `my_ghp_…`,
    ///   `keysk-proj-…`);
    /// - in Unicode compatibility form (NFKC), so fullwidth and other compatibility characters
    ///   (`ｐａｓｓｗｏｒｄ＝…`, `密码：…`) match like their ASCII forms.
    pub fn find(text: &str) -> Option<&'static str> {
        let read = view::without_invisible(text);
        find_in(read.text()).or_else(|| {
            let joined = view::joined(read.text())?;
            joined_spans(&joined).next().map(|(_, name)| name)
        })
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
    /// report, read the same way; used to redact text that is already stored.
    ///
    /// A credential found with invisible characters or a line break inside it spans them too,
    /// from its first character to its last as the text has them.
    ///
    /// Text with compatibility characters (fullwidth letters, ...) is matched in its NFKC form,
    /// as [`SecretFilter::find`] does; since those byte ranges do not map back onto the text,
    /// each line holding a credential is then one span.
    pub fn spans(text: &str) -> Vec<(Range<usize>, &'static str)> {
        let read = view::without_invisible(text);
        let mut spans = spans_in(read.text());
        if let Some(joined) = view::joined(read.text()) {
            spans.extend(
                joined_spans(&joined).map(|(r, name)| (joined.reading.source_range(&r), name)),
            );
        }
        spans.sort_by_key(|(r, _)| (r.start, std::cmp::Reverse(r.end)));
        let mut merged: Vec<(Range<usize>, &'static str)> = Vec::new();
        for (r, name) in spans {
            let r = read.source_range(&r);
            match merged.last_mut() {
                Some((last, _)) if r.start < last.end => last.end = last.end.max(r.end),
                _ => merged.push((r, name)),
            }
        }
        merged
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// The quick check on the non-ASCII runs says what the quick check on the whole text
        /// says, for texts mixing ASCII with combining marks (in and out of order), fullwidth
        /// and compatibility characters, Hangul jamo, CJK and Cyrillic.
        #[test]
        fn the_check_on_non_ascii_runs_is_the_whole_texts(
            parts in proptest::collection::vec(proptest::sample::select(vec![
                "a", "Z", " ", "=", "\n", "e\u{301}", "\u{301}", "\u{327}\u{301}",
                "\u{301}\u{327}", "ｐ", "＝", "…", "é", "\u{1100}\u{1161}", "가", "密码",
                "пароль", "\u{200b}", "ﬁ", "Ω", "\u{2126}",
            ]), 0..24)
        ) {
            use unicode_normalization::{IsNormalized, is_nfkc_quick};
            let text: String = parts.concat();
            let whole = matches!(is_nfkc_quick(text.chars()), IsNormalized::Yes);
            proptest::prop_assert_eq!(is_nfkc(&text), whole, "{:?}", text);
        }
    }

    // Credentials of several kinds (well-formed, never masks), each split or glued below.
    const AWS_ID: &str = "AKIAIOSFODNN7EXAMPLE";
    const AWS_SECRET: &str = "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";
    const GITHUB: &str = "ghp_R7tK2mQ9wW4vB8nL3pZ6yH1cJ5fD0gS2aE7u";
    const OPENAI: &str = "sk-proj-Xa9Bq2Lm7Rt4Vw1Zy8Kp3Nd6Hf0Jc5Ge";
    const OPENAI_LEGACY: &str = "sk-Ab3dEf6hIj9kLm2nOp5qRs8t";
    const ANTHROPIC: &str = "sk-ant-api03-Qm4Zr8TnWx6Yb1Vc9Lp5Hd3Kf7Gs0Jt";
    const SLACK: &str = "xoxb-2048596837-Zq8Rt5Wm2Np7";
    const GITLAB: &str = "glpat-Rk7Zq2Xw9Mn4Tb6Vc1L";
    const GOOGLE: &str = "AIzaSyB7qL2mN9pR4tV6wX8zA1cE3gH5jK0nP2r";
    const JWT: &str = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U";

    /// `secret` with `sep` put in after its first `at` bytes.
    fn split(secret: &str, at: usize, sep: &str) -> String {
        format!("{}{sep}{}", &secret[..at], &secret[at..])
    }

    /// The text around a credential, in Chinese, Russian and accented Latin, with no credential
    /// label in it: only the credential itself can make it refused.
    fn around(secret: &str) -> [String; 3] {
        [
            format!("部署说明：先用 {secret} 登录，然后删掉。"),
            format!("Напоминание: {secret} — удалить после релиза."),
            format!("Résumé du café: {secret} à supprimer après déploiement."),
        ]
    }

    fn assert_found(text: &str, pattern: &str) {
        match SecretFilter::find(text) {
            Some(name) => assert!(name.contains(pattern), "{text:?}: {name}"),
            None => panic!("not refused: {text:?}"),
        }
    }

    /// A credential with an invisible character inside it (zero-width space, non-joiner,
    /// joiner, word joiner, byte order mark, soft hyphen, a bidirectional override) is the
    /// same credential to whoever copies it.
    #[test]
    fn invisible_characters_inside_a_credential_do_not_hide_it() {
        let cases = [
            (AWS_ID, 4, "\u{200B}", "AWS access key id"),
            (AWS_ID, 9, "\u{202E}", "AWS access key id"),
            (GITHUB, 4, "\u{200B}", "GitHub"),
            (GITHUB, 7, "\u{2060}\u{2060}", "GitHub"),
            (OPENAI, 11, "\u{00AD}", "sk-"),
            (OPENAI_LEGACY, 3, "\u{200C}", "sk-"),
            (OPENAI_LEGACY, 8, "\u{200D}", "sk-"),
            (ANTHROPIC, 7, "\u{FEFF}", "sk-"),
            (SLACK, 5, "\u{180E}", "Slack"),
            (GITLAB, 6, "\u{2063}", "GitLab"),
            (GOOGLE, 4, "\u{200B}", "Google"),
            (AWS_SECRET, 20, "\u{200B}", "AWS secret access key"),
            (JWT, 3, "\u{2069}", "JSON Web Token"),
        ];
        for (secret, at, sep, pattern) in cases {
            for text in around(&split(secret, at, sep)) {
                assert_found(&text, pattern);
            }
        }
        // Label rules read the text without them too.
        assert_found("пар\u{200B}оль: Zt7$uPq91w", "label");
        assert_found("pass\u{00AD}word = hun\u{200C}ter22", "credential");
    }

    /// A credential whose characters go on on the next line (`\n` or `\r\n`, the next line
    /// indented or not) is found; so is one over several short lines.
    #[test]
    fn a_credential_broken_over_lines_is_found() {
        let cases = [
            (split(AWS_ID, 8, "\n"), "AWS access key id"),
            (split(AWS_ID, 4, "\r\n    "), "AWS access key id"),
            ("AKIA\nIOSF\nODNN\n7EXAMPLE".to_owned(), "AWS access key id"),
            (split(GITHUB, 12, "\r\n"), "GitHub"),
            (split(OPENAI, 10, "\n"), "sk-"),
            (split(ANTHROPIC, 16, "\n  "), "sk-"),
            (split(SLACK, 9, "\n"), "Slack"),
            (split(GITLAB, 10, "\n"), "GitLab"),
            (split(GOOGLE, 8, "\n"), "Google"),
            (split(AWS_SECRET, 20, "\n\t"), "AWS secret access key"),
            (split(JWT, 34, "\n"), "JSON Web Token"),
        ];
        for (secret, pattern) in cases {
            for text in around(&secret) {
                assert_found(&text, pattern);
            }
            assert_found(&format!("Ключи ниже.\n{secret}\n之后删除。"), pattern);
            // Words glued on the lines before and after do not hide it either.
            assert_found(
                &format!("voilà les clés\n{secret}\nmerci beaucoup"),
                pattern,
            );
        }
    }

    /// A distinctive token prefix glued after letters, digits or `_` still starts a token.
    #[test]
    fn a_credential_glued_after_a_word_is_found() {
        let cases = [
            (format!("token{AWS_ID}"), "AWS access key id"),
            (format!("x_{AWS_ID}"), "AWS access key id"),
            (format!("TOKEN{AWS_ID}"), "AWS access key id"),
            (format!("my_{GITHUB}"), "GitHub"),
            (format!("gh{GITHUB}"), "GitHub"),
            (format!("key{OPENAI}"), "sk-"),
            (format!("key{ANTHROPIC}"), "sk-"),
            (format!("prod_{SLACK}"), "Slack"),
            (format!("url{GITLAB}"), "GitLab"),
            (format!("cfg{GOOGLE}"), "Google"),
            (format!("auth{JWT}"), "JSON Web Token"),
            ("billingsk_live_51H8xYzAbCdEf2GhIjK3".to_owned(), "Stripe"),
        ];
        for (glued, pattern) in cases {
            for text in around(&glued) {
                assert_found(&text, pattern);
            }
        }
    }

    /// Invisible characters, a line break and a glued prefix at once.
    #[test]
    fn every_evasion_at_once_is_found() {
        let text = format!("我的 x_{}\u{200B}\n{} готово", &AWS_ID[..9], &AWS_ID[9..]);
        assert_found(&text, "AWS access key id");
    }

    /// Prose wrapped over lines, identifiers with `_`, words holding a prefix in small letters or
    /// inside a word in capitals, kebab and snake names ending in a prefix, and zero-width
    /// joiners in emoji, Persian and Hindi are not credentials.
    #[test]
    fn ordinary_text_is_not_a_credential() {
        for text in [
            // Prose across line breaks, in several languages and with long words.
            "The internationalization\nConsiderations for the README2024\nUpdates are done.",
            "Мы обсудили миграцию базы\nданных и решили отложить её.",
            "迁移计划已经确认\n下周一开始执行。",
            "Le café était très bon, merci\nbeaucoup pour l'accueil à Genève.",
            "user_id\nsession_id\ncreated_at\nupdated_at2024",
            "- first item\n- second item\n- third item",
            "See AKIA\nprefix docs; the ASIA\nprefix is for temporary credentials.",
            // Identifiers, words holding prefixes in small letters, capitals inside a word.
            "slovakia_asia_regions and akiaiosfodnn7example in lowercase",
            "EURASIANECONOMICUNIONREPORT and SLOVAKIAREPUBLICSTATISTICS",
            "get_user_by_id, parse_ghp_header, my_sk_proj_config",
            "risk-assessment-framework-2024-v2 and task-proj-management-2024-q3",
            "network_live_stream2024, desk_test_environment01",
            "honeyJuice_store.module_name.function_name",
            // Zero-width joiners and non-joiners in emoji, Persian and Hindi.
            "👩\u{200D}💻 👨\u{200D}👩\u{200D}👧\u{200D}👦 🏳\u{FE0F}\u{200D}🌈",
            "می\u{200C}خواهم این کتاب را بخوانم",
            "क्\u{200D}ष और क्\u{200C}ष अलग दिखते हैं",
            "\u{FEFF}A byte order mark starts this note.",
        ] {
            assert_eq!(SecretFilter::find(text), None, "{text:?}");
            assert!(SecretFilter::spans(text).is_empty(), "{text:?}");
        }
    }
}
