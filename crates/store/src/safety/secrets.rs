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
    /// Group 1 is a value in prose ("the password is ..."): it must look like a credential
    /// (see [`strong_value`]).
    Prose,
}

/// Credential-like keys: the key may carry a prefix (`DB_PASSWORD`, `github.token`,
/// `AWS_SECRET_ACCESS_KEY`) but must end with the credential word.
const KEY: &str = r"[A-Za-z0-9_.-]*(?:password|passwd|passphrase|passcode|pwd|secret|token|(?:api|secret|access|private|account|signing|encryption|master)[_ -]?key|apikey|client[_-]?secret|credentials?)|(?:[A-Za-z0-9_.-]*[_.-])?(?:pass|pw|psw|pword)";

/// Credential words of other languages written in cased, spaced scripts (Latin, Cyrillic,
/// Greek): Russian, Ukrainian, Bulgarian, Serbian, Spanish, Portuguese, German, French, Italian,
/// Dutch, Swedish, Norwegian, Danish, Finnish, Estonian, Turkish, Polish, Czech, Slovak,
/// Hungarian, Romanian, Croatian, Slovenian, Lithuanian, Indonesian, Malay, Vietnamese and Greek.
/// Words that are also ordinary vocabulary ("clave" = keyword, "ключ" = key, Italian "parola"
/// = word, Greek "κωδικός" = code) only count in their credential phrases. A label must follow
/// a non-letter, and what follows it is a qualifier or a separator, so `wachtwoordbeleid:` is not
/// a label.
const LOCAL_LABEL: &str = r"пароль|пароля|токен|ключ API|API-ключ|секретный ключ|ключ доступа|ключ доступу|секретний ключ|паролата|парола|лозинка|лозинку|contraseña|clave secreta|clave de acceso|clave de API|clave API|senha|chave secreta|chave de acesso|chave de API|chave API|passwort|kennwort|api-schlüssel|geheimer schlüssel|mot de passe|mdp|jeton|clé secrète|clé API|clé d'API|parola d'ordine|chiave segreta|chiave API|codice segreto|wachtwoord|lösenordet|lösenord|passordet|passord|adgangskoden|adgangskode|kodeordet|kodeord|salasana|salasõna|parool|şifresi|şifre|hasło|hasła|heslo|hesla|jelszava|jelszó|parolă|parola de acces|lozinka|lozinke|geslo|slaptažodis|kata sandinya|kata sandi|kata laluan|mật khẩu|κωδικός πρόσβασης|συνθηματικό";

/// Credential words of scripts that need no word boundary before them: Chinese, Japanese and
/// Korean (`生产数据库密码`, `API密钥`), and Arabic, Persian, Urdu, Hebrew, Hindi, Bengali and Thai,
/// whose words take attached prefixes (`وكلمة المرور`, `הסיסמה`) or are not spaced at all.
const UNSPACED_LABEL: &str = r"密码|密碼|口令|密钥|密鑰|秘钥|令牌|パスワード|暗証番号|秘密鍵|トークン|APIキー|비밀번호|비번|패스워드|암호|토큰|API ?키|كلمة المرور|كلمة السر|كلمة مرور|الرقم السري|رمز عبور|کلمه عبور|گذرواژه|پاس ورڈ|סיסמה|סיסמא|पासवर्ड|পাসওয়ার্ড|รหัสผ่าน";

/// Any credential label: a Latin, Cyrillic or Greek one (English `key` words, then `extra`)
/// after a non-letter, or an unspaced-script one anywhere.
fn label(extra: &str) -> String {
    format!(r"(?:(?:^|[^\p{{L}}\p{{N}}_])(?:{extra})|(?:{UNSPACED_LABEL}))")
}

/// English credential words in prose ("the password is ...").
const PROSE_LABEL: &str = r"password|passphrase|passcode|pwd|api key|secret key|access key|access token|api token|token|credentials?";

/// A short qualifier between a credential word and its value: "for staging", "от базы",
/// "de la base", "für den Server".
const QUALIFIER: &str = r"(?:[ \t]+(?:for|of|on|to|at|de|del|da|do|du|des|für|von|zum|zur|bei|di|della|per|от|для|на|к|до|van|voor|naar|för|till|til|dla|pro|ke|untuk|cho|của|για|στο|στη)(?:[ \t]+(?:the|la|el|le|les|a|o|der|die|das|den|dem|il|lo|de|het|το|τη|την|τον))?[ \t]+[\p{L}\p{N}_.-]+){0,2}";

/// Separators that are words: "is", "是", "は", "는", "—", "es", "é", "ist", "lautet", "est",
/// "è", "är", "er", "jest", "je", "е", "este", "adalah", "là", "είναι", "هي", "היא", "คือ". Finnish
/// "on" and Polish "to" are left out: in English they start a qualifier ("the password on db01
/// expired").
const WORD_SEP: &str = r"(?:[ \t]+(?:is|was|es|era|é|ist|lautet|est|è|equals|är|er|jest|je|este|adalah|ialah|là|είναι|هي|هو|היא|הוא|זה|е)[ \t]+|[ \t]*(?:是|为|為|は|는|은|—|–|คือ)[ \t]*)";

fn assignment() -> String {
    // key, optional closing quote of a quoted key, separator (`=`, `:`, `:=`, `=>`), optional
    // opening quote, value.
    format!(
        r#"(?i)(?:^|[^A-Za-z0-9_.-])(?:{KEY})["']?([ \t]*(?::=|=>|==?|:)[ \t]*)(["'`]?)([^\s"'`,;)\]}}>]+)"#
    )
}

/// A credential word of any language, a qualifier, then `:` / `=` (or a word separator): the
/// value is ASCII (a password in prose of another script stops at the first non-ASCII letter).
fn local_assignment() -> String {
    format!(
        r#"(?i){}{QUALIFIER}["']?([ \t]*(?::=|=>|==?|:)[ \t]*)(["'`]?)([!#-&(-+\--~]+)"#,
        label(LOCAL_LABEL)
    )
}

/// The prose forms: "the password is hunter2", "密码是 S3cr3t", "la contraseña es X".
fn prose_assignment() -> String {
    format!(
        r#"(?i){}{QUALIFIER}{WORD_SEP}["'`]?([!#-&(-+\--~]+)"#,
        label(&format!("{LOCAL_LABEL}|{PROSE_LABEL}"))
    )
}

/// A credential label alone on its line (`password:`), its value alone on the next.
fn next_line_value() -> String {
    format!(
        r#"(?im){}[ \t]*(?::|=)[ \t]*\r?\n[ \t]*["'`]?([!#-&(-+\--~]+?)["'`]?[ \t]*\r?$"#,
        label(&format!("{KEY}|{LOCAL_LABEL}"))
    )
}

fn patterns() -> &'static [SecretPattern] {
    static PATTERNS: OnceLock<Vec<SecretPattern>> = OnceLock::new();
    PATTERNS.get_or_init(|| {
        let assignment = assignment();
        let local = local_assignment();
        let prose = prose_assignment();
        let next_line = next_line_value();
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
            ("DigitalOcean token", r"\bdo[opr]_v1_[a-f0-9]{64}\b", Confirm::Shape),
            (
                "Shopify token",
                r"\bshp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}\b",
                Confirm::Shape,
            ),
            ("Mailgun key", r"\bkey-[0-9a-f]{32}\b", Confirm::Shape),
            (
                "Telegram bot token",
                r"\b\d{8,10}:AA[A-Za-z0-9_-]{33}\b",
                Confirm::Shape,
            ),
            (
                "Google OAuth token or client secret",
                r"\bya29\.[0-9A-Za-z_-]{20,}|\bGOCSPX-[A-Za-z0-9_-]{20,}",
                Confirm::Shape,
            ),
            ("Stripe webhook secret", r"\bwhsec_[A-Za-z0-9]{24,}", Confirm::Shape),
            ("Slack app token", r"\bxapp-\d-[A-Za-z0-9-]{20,}", Confirm::Shape),
            (
                "Notion token",
                r"\b(?:secret_[A-Za-z0-9]{43}|ntn_[A-Za-z0-9]{40,})\b",
                Confirm::Shape,
            ),
            ("Linear API key", r"\blin_api_[A-Za-z0-9]{40}\b", Confirm::Shape),
            (
                "HashiCorp Vault token",
                r"\bhv[sbr]\.[A-Za-z0-9_-]{24,}",
                Confirm::Shape,
            ),
            ("Doppler token", r"\bdp\.(?:pt|st|ct|sa)\.[A-Za-z0-9]{40,}", Confirm::Shape),
            (
                "Grafana token",
                r"\bgl(?:sa|c)_[A-Za-z0-9_+/=-]{32,}",
                Confirm::Shape,
            ),
            ("New Relic key", r"\bNRAK-[A-Z0-9]{27}\b", Confirm::Shape),
            (
                "Postman key",
                r"\bPMAK-[a-f0-9]{24}-[a-f0-9]{34}\b",
                Confirm::Shape,
            ),
            ("age secret key", r"\bAGE-SECRET-KEY-1[0-9A-Z]{58}\b", Confirm::Shape),
            (
                "Groq / xAI / Replicate key",
                r"\b(?:gsk_[A-Za-z0-9]{48,}|xai-[A-Za-z0-9]{70,}|r8_[A-Za-z0-9]{37})\b",
                Confirm::Shape,
            ),
            ("Databricks token", r"\bdapi[a-f0-9]{32}\b", Confirm::Shape),
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
                "password flag glued to its value (mysql -pVALUE)",
                r"(?i)\b(?:mysql|mysqldump|mysqladmin|mysqlimport|mysqlsh|mariadb|mariadb-dump|mariadb-admin)\b[^\n|;&]*?[ \t]-p([^\s`-][^\s`]*)",
                Confirm::Value,
            ),
            (
                "client password argument (sshpass -p, redis-cli -a, curl -u user:pass)",
                r"(?i)\b(?:sshpass[ \t]+-p[ \t]*|redis-cli\b[^\n|;&]*?[ \t]-a[ \t]+|(?:curl|wget)\b[^\n|;&]*?[ \t](?:-u|--user)[ \t]+[^\s:]+:|docker[ \t]+login\b[^\n|;&]*?[ \t]-p[ \t]+|ldap\w+\b[^\n|;&]*?[ \t]-w[ \t]+|smbclient\b[^\n|;&]*?[ \t]-U[ \t]*[^\s%]+%)([^\s-][^\s]*)",
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
            (
                "credential assignment in another language (密码: / パスワード: / пароль: / contraseña: value)",
                local.as_str(),
                Confirm::Assignment,
            ),
            (
                "credential in prose (the password is / 密码是 / la contraseña es value)",
                prose.as_str(),
                Confirm::Prose,
            ),
            (
                "credential label with its value on the next line",
                next_line.as_str(),
                Confirm::Value,
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
    let v = v
        .trim_matches(['"', '\'', '`'])
        .trim_end_matches(['.', ':', '!', '?']);
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

/// Whether a value named in prose looks like a credential rather than a word: after trailing
/// punctuation is cut, at least 4 characters, not a placeholder, and either letters mixed with
/// digits, a symbol other than `-` / `_`, or six digits or more; a hyphenated description
/// ("SHA256-hashed", "base64-encoded") is not.
fn strong_value(v: &str) -> bool {
    let v = v.trim_end_matches(['.', ',', ';', ':', '!', '?', ')', '"', '\'']);
    if v.chars().count() < 4 || is_placeholder(v) {
        return false;
    }
    if let Some((_, last)) = v.rsplit_once('-')
        && last.len() >= 3
        && last.chars().all(|c| c.is_ascii_lowercase())
    {
        return false;
    }
    let digits = v.chars().filter(char::is_ascii_digit).count();
    let letters = v.chars().filter(char::is_ascii_alphabetic).count();
    let symbol = v
        .chars()
        .any(|c| !c.is_ascii_alphanumeric() && c != '-' && c != '_' && c != '.');
    digits > 0 && letters > 0 || symbol || digits >= 6 && letters == 0
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
    !prose_follows || v.chars().count() >= 4 && looks_random(v)
}

/// Checks text against the credential patterns.
///
/// ```
/// use memloop_store::SecretFilter;
/// assert!(SecretFilter::check("the user forgot the password reset flow").is_ok());
/// let err = SecretFilter::check("db password = hunter22").unwrap_err();
/// assert!(err.to_string().contains("credential assignment"));
/// assert!(!err.to_string().contains("hunter22"));
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct SecretFilter;

impl SecretFilter {
    /// The name of the first pattern that matches, if any.
    ///
    /// The text is matched in Unicode compatibility form (NFKC), so fullwidth and other
    /// compatibility characters (`ｐａｓｓｗｏｒｄ＝…`, `密码：…`) match like their ASCII forms.
    pub fn find(text: &str) -> Option<&'static str> {
        use unicode_normalization::{UnicodeNormalization, is_nfkc_quick};
        let normalized: String;
        let text = if matches!(
            is_nfkc_quick(text.chars()),
            unicode_normalization::IsNormalized::Yes
        ) {
            text
        } else {
            normalized = text.nfkc().collect();
            &normalized
        };
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
                Confirm::Prose => p
                    .regex
                    .captures_iter(text)
                    .any(|c| c.get(1).is_some_and(|m| strong_value(m.as_str()))),
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
    ///
    /// Text with compatibility characters (fullwidth letters, ...) is matched in its NFKC form,
    /// as [`SecretFilter::find`] does; since those byte ranges do not map back onto the text,
    /// each line holding a credential is then one span.
    pub fn spans(text: &str) -> Vec<(std::ops::Range<usize>, &'static str)> {
        use unicode_normalization::{IsNormalized, is_nfkc_quick};
        if !matches!(is_nfkc_quick(text.chars()), IsNormalized::Yes) {
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
                Confirm::Prose => spans.extend(p.regex.captures_iter(text).filter_map(|c| {
                    c.get(1)
                        .filter(|m| strong_value(m.as_str()))
                        .map(|m| (m.range(), p.name))
                })),
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
