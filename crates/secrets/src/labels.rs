//! The structural rule of the secret filter: a credential word of any language, a short window
//! (a qualifier of a few words, or a few characters of an unspaced script), a separator or a
//! copula, then a value shaped like a secret.
//!
//! No phrase is matched as a whole: the label is one word (or a fixed compound such as `mot de
//! passe`) from [`LABELS`], and everything after it is judged by its shape, so a new qualifier
//! ("пароль администратора", "token dostępu do API", "webhook secret for payments") or a new
//! word order needs no new pattern. The value decides: a placeholder, an environment-variable
//! reference, a vault path, a file name or an ordinary word is not a secret; a value with mixed
//! character classes is, and the less the context says "this is an assignment", the more random
//! the value must look.

use regex::Regex;
use std::ops::Range;
use std::sync::OnceLock;

/// The name of the structural rule, as errors and redaction markers show it.
pub(crate) const NAME: &str =
    "credential after its label (password / 密码 / пароль / contraseña … : value)";

/// Credential words in English, as regex fragments (matched case-insensitively). A label must
/// start after a non-letter (`DB_PASSWORD`, `github.token` and `x-api-key` count) and end
/// before one, so `passwordless`, `max_tokens` and `tokenizer` are not labels.
const ENGLISH_LABELS: &[&str] = &[
    r"passwords?",
    r"passwd",
    r"passphrase",
    r"passcode",
    r"pass[ _-]?word",
    r"pass",
    r"pwd",
    r"pw",
    r"pin(?:[ _-]?code)?",
    r"secret(?:[ _-]?key)?",
    r"client[ _-]?secret",
    r"webhook[ _-]?secret",
    r"api[ _-]?(?:key|token|secret)",
    r"apikey",
    r"(?:access|auth|bearer|refresh|session|bot|personal access|deploy|admin|service)[ _-]?(?:token|key)",
    r"token",
    r"(?:private|signing|encryption|master|license|licence|secret access)[ _-]?key",
    r"credentials?",
    r"(?:unlock|access|door|security|alarm|gate|lock) code",
];

/// Credential words of other languages written with spaces between words: Russian, Ukrainian,
/// Belarusian, Bulgarian, Serbian, Croatian, Bosnian, Slovenian, Macedonian, Polish, Czech, Slovak,
/// Lithuanian, Latvian, Estonian, Finnish, Hungarian, Romanian, Spanish, Catalan, Galician,
/// Portuguese, French, Italian, German, Dutch, Swedish, Norwegian, Danish, Icelandic, Turkish,
/// Azerbaijani, Indonesian, Malay, Tagalog, Swahili, Vietnamese and Greek. Inflected forms are
/// listed (`пароля`, `hasła`, `salasanan`, `şifresi`). Words that are also ordinary vocabulary
/// count too (`clave`, `chave`, `ключ` only with API/доступа): the value decides.
const OTHER_LABELS: &[&str] = &[
    // Russian, Ukrainian, Belarusian, Bulgarian, Macedonian, Serbian (Cyrillic)
    r"парол[ьяюеи]м?",
    r"паролем",
    r"паролата",
    r"парола",
    r"пин[ -]?код",
    r"токен[аоу]?",
    r"api[ -]ключ[аи]?",
    r"ключ[аи]? (?:api|доступ[ау])",
    r"секретн(?:ый|ий|ого|ого) ключ[аи]?",
    r"код доступа",
    r"(?:кодовое|контрольное|секретное) слово",
    r"уч[её]тные данные",
    r"лозинк[аеу]",
    r"шифра",
    // Polish, Czech, Slovak, Slovenian, Croatian, Serbian, Bosnian (Latin)
    r"hasł(?:em|o|a|u|e)",
    r"haśle",
    r"hes(?:lo|la|lem|le)",
    r"ges(?:lo|la)",
    r"lozink[aeu]",
    r"zaporka",
    r"šifr[aeu]",
    r"klucz(?:a)? (?:api|dostępu)",
    r"klíč(?:e)? (?:api|k api)",
    r"kľúč (?:api|k api)",
    r"přístupový klíč",
    r"přihlašovací údaje",
    r"dane logowania",
    r"tokenu?",
    // Baltic, Finnic, Hungarian
    r"slaptažod(?:is|žio|į)",
    r"parole?s?",
    r"parool[ie]?",
    r"salasõna",
    r"salasana(?:nsa|mme|ni|si|n|a)?",
    r"tunnussana",
    r"jelsz(?:avát|ava|ót|ó)",
    // Romance
    r"parol[ăa](?: de acces)?",
    r"parolei",
    r"cheia? (?:api|secretă)",
    r"contraseñas?",
    r"contrasenya",
    r"contrasinal",
    r"clave(?: secreta| de acceso| de (?:la )?api| api)?",
    r"c[óo]digo (?:de acceso|de acesso|pin)",
    r"senhas?",
    r"palavra[ -]passe",
    r"chave(?: secreta| de acesso| de api| api)?",
    r"mot de passe",
    r"identifiants",
    r"mdp",
    r"jeton",
    r"clé (?:api|d'api|secrète|d'accès)",
    r"code (?:d'accès|pin)",
    r"parola d'ordine",
    r"credenziali",
    r"credenciales",
    r"credenciais",
    r"chiave (?:api|segreta|di accesso)",
    r"codice (?:segreto|di accesso)",
    // Germanic
    r"passw(?:ort|örter)",
    r"kennwort",
    r"zugangsdaten",
    r"inloggegevens",
    r"api-schlüssel",
    r"geheimer schlüssel",
    r"zugangs(?:code|schlüssel|token)",
    r"wachtwoord",
    r"toegangscode",
    r"api-sleutel",
    r"geheime sleutel",
    r"lösenord(?:et)?",
    r"api-nyckel(?:n)?",
    r"hemlig nyckel",
    r"passord(?:et)?",
    r"api-nøkkel(?:en)?",
    r"adgangskode(?:n)?",
    r"kodeord(?:et)?",
    r"api-nøgle(?:n)?",
    r"lykilorð(?:ið)?",
    // Turkish, Azerbaijani
    r"şifre(?:si|niz|m)?",
    r"parolası",
    r"(?:api|gizli|erişim) anahtarı",
    r"açar söz",
    r"kimlik bilgileri",
    // Indonesian, Malay, Tagalog, Swahili, Vietnamese
    r"kata sandi(?:nya)?",
    r"kata laluan",
    r"sandi",
    r"kunci (?:api|rahsia|rahasia)",
    r"nenosiri",
    r"neno la siri",
    r"mật khẩu",
    r"khóa (?:api|bí mật)",
    r"mã (?:truy cập|pin)",
    // Greek
    r"κωδικ(?:ός|ού|ό)(?: πρόσβασης)?",
    r"συνθηματικό",
    r"κλειδί api",
    r"μυστικό κλειδί",
];

/// Credential words of scripts that need no word boundary before or after them: Chinese,
/// Japanese, Korean, Thai, and Arabic, Persian, Urdu, Hebrew, Hindi and Bengali, whose words take
/// attached prefixes (`وكلمة المرور`, `הסיסמה`) or are not spaced at all (`生产数据库密码是`).
const UNSPACED_LABELS: &[&str] = &[
    // Chinese
    r"密码|密碼|口令|密钥|密鑰|秘钥|秘鑰|令牌|凭证|憑證|通行码|PIN码",
    // Japanese
    r"パスワード|暗証番号|秘密鍵|トークン|APIキー|アクセスキー|シークレット|合言葉",
    // Korean
    r"비밀번호|비번|패스워드|암호|토큰|API ?키|액세스 ?키|비밀 ?키",
    // Thai
    r"รหัสผ่าน|โทเค็น|รหัส",
    // Arabic
    r"كلمة المرور|كلمة السر|كلمة مرور|الرقم السري|الرمز السري|رمز الدخول|رمز الوصول|مفتاح API|المفتاح السري",
    // Persian, Urdu
    r"رمز عبور|کلمه عبور|گذرواژه|کلید API|توکن|رمز|پاس ورڈ|خفیہ لفظ",
    // Hebrew
    r"סיסמ[האת]|טוקן|מפתח API",
    // Hindi, Bengali
    r"पासवर्ड|कूटशब्द|टोकन|एपीआई कुंजी|गुप्त कुंजी|পাসওয়ার্ড|টোকেন",
];

/// Labels that also end a compound word (`Datenbankpasswort`, `WLAN-Passwort` is already split,
/// `Zugriffstoken`, `tietokantasalasana`): letters may come before them.
const COMPOUND_TAILS: &[&str] = &[
    "password",
    "passwort",
    "kennwort",
    "wachtwoord",
    "lösenord",
    "lösenordet",
    "passord",
    "passordet",
    "kodeord",
    "adgangskode",
    "salasana",
    "salasanan",
    "jelszó",
    "jelszava",
    "token",
];

/// English labels that are also ordinary words: they need their separator right after them.
const TIGHT_LABELS: &[&str] = &["pass", "pw", "pwd"];

/// Labels of a PIN: a value of four digits is a credential after them (after any other label a
/// value of digits only must have six).
fn is_pin_label(label: &str) -> bool {
    let l = label.to_lowercase();
    l.starts_with("pin")
        || l.contains(" pin")
        || l.ends_with(" code")
        || l.contains("passcode")
        || l.contains("пин")
        || l.contains("暗証番号")
        || l.contains("pin码")
        || l.contains("الرقم السري")
        || l.contains("الرمز السري")
}

/// Words that join a label to its value: "is", "是", "ist", "est", "είναι", … Finnish and Estonian
/// "on" and Polish and Czech "to" only count after a label that is not English ("the password on
/// db01", "the token to use").
const COPULAS: &[&str] = &[
    "is",
    "was",
    "are",
    "equals",
    "es",
    "era",
    "é",
    "è",
    "e",
    "és",
    "ist",
    "lautet",
    "war",
    "est",
    "était",
    "är",
    "var",
    "er",
    "jest",
    "je",
    "bylo",
    "е",
    "є",
    "это",
    "este",
    "adalah",
    "ialah",
    "yaitu",
    "là",
    "είναι",
    "ήταν",
    "هي",
    "هو",
    "است",
    "היא",
    "הוא",
    "זה",
    "है",
    "হল",
    "คือ",
    "ni",
    "ay",
    "yra",
    "ir",
    "është",
    "olan",
    "be",
    "becomes",
    "became",
    "to",
    "now",
];
const NON_ENGLISH_COPULAS: &[&str] = &["on", "oli", "na", "auf", "sur", "para", "em", "in"];

/// Whether `w` is a copula (after an English label or not).
fn is_copula(w: &str, english: bool) -> bool {
    if w.len() > 12 {
        return false;
    }
    let eq = |c: &&str| {
        if w.is_ascii() {
            c.eq_ignore_ascii_case(w)
        } else {
            *c == w || w.to_lowercase() == *c
        }
    };
    COPULAS.iter().any(eq) || !english && NON_ENGLISH_COPULAS.iter().any(eq)
}

/// Copulas and topic markers attached to the label in unspaced scripts: `密码是`, `パスワードは`,
/// `비밀번호는`, `รหัสผ่านคือ`.
const ATTACHED_COPULAS: &[&str] = &["是", "为", "為", "係", "は", "が", "는", "은", "คือ"];

/// Words a value is not, though it sits where a value would: descriptions of a field and
/// well-known technical names.
const ORDINARY_VALUES: &[&str] = &[
    "optional",
    "required",
    "mandatory",
    "hidden",
    "masked",
    "encrypted",
    "hashed",
    "redacted",
    "unset",
    "empty",
    "none",
    "null",
    "nil",
    "unknown",
    "disabled",
    "enabled",
    "default",
    "same",
    "1password",
    "bitwarden",
    "lastpass",
    "keepass",
    "keepassxc",
    "keychain",
    "changeme",
    "change-me",
    "change_me",
    "placeholder",
    "example",
    "sample",
    "dummy",
    "tbd",
    "todo",
    "n/a",
    "na",
    "see",
    "ask",
    "true",
    "false",
    "yes",
    "no",
    "on",
    "off",
    "oauth",
    "oauth2",
    "oauth1",
    "oidc",
    "saml",
    "saml2",
    "http2",
    "http3",
    "ipv4",
    "ipv6",
    "utf8",
    "utf-8",
    "utf16",
    "base64",
    "base32",
    "hex",
    "md5",
    "sha1",
    "sha-1",
    "sha256",
    "sha-256",
    "sha384",
    "sha512",
    "sha-512",
    "sha3",
    "bcrypt",
    "scrypt",
    "argon2",
    "argon2id",
    "argon2i",
    "pbkdf2",
    "hmac",
    "hmac-sha256",
    "aes",
    "aes128",
    "aes256",
    "aes-128",
    "aes-256",
    "aes-256-gcm",
    "chacha20",
    "rsa",
    "rsa2048",
    "rsa4096",
    "rsa-2048",
    "rsa-4096",
    "ed25519",
    "x25519",
    "ecdsa",
    "p256",
    "p-256",
    "secp256k1",
    "hs256",
    "hs384",
    "hs512",
    "rs256",
    "rs384",
    "rs512",
    "es256",
    "es384",
    "ps256",
    "eddsa",
    "bearer",
    "basic",
    "digest",
    "jwt",
    "jwe",
    "jws",
    "totp",
    "hotp",
    "2fa",
    "mfa",
    "pkce",
    "x509",
    "x.509",
    "pkcs8",
    "pkcs12",
    "pkcs#8",
    "pkcs#12",
    "s3",
    "kms",
    "gpt4",
    "gpt-4",
    "gpt4o",
    "gpt-4o",
];

/// Whether a value is a placeholder, a reference or a mask rather than a secret: an environment
/// or template lookup (`$VAR`, `${VAR}`, `%VAR%`, `env:VAR`, `<...>`, `{{...}}`, `os.environ[...]`,
/// a call), a secret-manager or vault path, a URL, a filesystem path, an e-mail address, a file
/// name, a mask (`***`, `xxxx`, `...`), `your-token-here`, or an ordinary field word.
pub(crate) fn is_placeholder(v: &str) -> bool {
    let v = v
        .trim_matches(['"', '\'', '`'])
        .trim_end_matches(['.', ':', '!', '?', ',', ';']);
    let lower = v.to_lowercase();
    if v.is_empty()
        || v.starts_with(['$', '<', '{', '%', '*', '[', '/', '~', '…', '('])
        || v.starts_with("./")
        || v.starts_with("../")
        || v.contains('(')
        || v.contains("://")
        || v.contains("{{")
        || v.contains("${")
        || v.contains("…")
        || v.contains("...")
        || v.contains("****")
        || lower.contains("xxxx")
        || lower.starts_with("your")
        || lower.starts_with("my-")
        || lower.starts_with("my_")
        || lower.ends_with("here")
        || lower.ends_with("-here")
        || lower.starts_with("process.env")
        || lower.starts_with("os.environ")
        || lower.starts_with("os.getenv")
        || lower.starts_with("env.")
        || lower.starts_with("env[")
        || lower.starts_with("env:")
        || lower.starts_with("secrets.")
        || lower.starts_with("vars.")
        || lower.starts_with("settings.")
        || lower.starts_with("config.")
        || lower.starts_with("vault:")
        || lower.starts_with("vault/")
        || lower.starts_with("secret/")
        || lower.starts_with("kv/")
        || lower.starts_with("arn:")
        || lower.starts_with("op:")
        || lower.starts_with("keychain:")
        || lower.starts_with("ssm:")
        || lower.starts_with("gcp:")
        || lower.starts_with("projects/")
        || (v.len() >= 2 && v.starts_with('%') && v.ends_with('%'))
    {
        return true;
    }
    // A content digest (`sha256:4f8a2c…`): names an image or a file, not a secret.
    if let Some((algo, hex)) = v.split_once(':')
        && !algo.is_empty()
        && algo.len() <= 10
        && algo
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && hex.len() >= 8
        && hex.chars().all(|c| c.is_ascii_hexdigit())
    {
        return true;
    }
    // A YAML tag (`!vault`, `!Ref`, `!Sub`): the value follows it, or is looked up.
    if let Some(tag) = v.strip_prefix('!')
        && !tag.is_empty()
        && tag.chars().all(|c| c.is_ascii_alphabetic())
    {
        return true;
    }
    let mut chars = v.chars();
    let first = chars.next();
    if v.chars().count() >= 3 && chars.all(|c| Some(c) == first) {
        return true; // a mask: `xxxx`, `****`, `....`
    }
    ORDINARY_VALUES.contains(&lower.as_str())
        || is_env_name(v)
        || is_path(v)
        || is_email(v)
        || is_file_name(&lower)
}

/// `GITHUB_TOKEN`, `DB_PASS`: capitals, digits and `_`, with an `_` (the name of an environment
/// variable, not its value).
fn is_env_name(v: &str) -> bool {
    v.contains('_')
        && v.chars().next().is_some_and(|c| c.is_ascii_uppercase())
        && v.chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
}

/// A path of plain segments (`secret/data/prod/db`, `infra/db-password`): every segment between
/// `/` is lowercase letters, digits, `-`, `_`, `.` (a base64 secret's segments are not).
fn is_path(v: &str) -> bool {
    v.contains('/')
        && v.split('/').all(|s| {
            s.chars().all(|c| {
                c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '_' | '.' | ':')
            }) || is_env_name(s)
        })
}

fn is_email(v: &str) -> bool {
    let Some((user, host)) = v.split_once('@') else {
        return false;
    };
    !user.is_empty()
        && host.contains('.')
        && !host.ends_with('.')
        && host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-'))
}

/// `token.json`, `id_rsa.pem`, `.env.local`: a name with a file extension.
fn is_file_name(lower: &str) -> bool {
    const EXT: &[&str] = &[
        "json", "txt", "pem", "key", "env", "yaml", "yml", "toml", "ini", "cfg", "conf", "md",
        "enc", "gpg", "age", "kdbx", "p12", "pfx", "crt", "cer", "jks", "keystore", "local",
        "secret", "secrets", "rs", "py", "js", "ts", "go", "sh",
    ];
    lower.rsplit_once('.').is_some_and(|(stem, ext)| {
        !stem.is_empty()
            && EXT.contains(&ext)
            && stem
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    })
}

/// The character make-up of a value.
#[derive(Debug, Default)]
struct Makeup {
    chars: usize,
    letters: usize,
    digits: usize,
    upper: usize,
    lower: usize,
    /// Characters other than letters, digits, `-`, `_` and `.`.
    symbols: usize,
    /// Capitals right after a small letter (`wJalrXUtn`, `myPass`; not `X-Api-Key`).
    humps: usize,
    /// Changes between letters and digits (`Qw7zLp2Vn9` has many, `coffee2024` one).
    transitions: usize,
}

impl Makeup {
    fn of(v: &str) -> Self {
        let mut m = Self::default();
        let mut prev: Option<char> = None;
        for c in v.chars() {
            m.chars += 1;
            if c.is_alphabetic() {
                m.letters += 1;
                if c.is_uppercase() {
                    m.upper += 1;
                    if prev.is_some_and(char::is_lowercase) {
                        m.humps += 1;
                    }
                } else if c.is_lowercase() {
                    m.lower += 1;
                }
            } else if c.is_ascii_digit() {
                m.digits += 1;
            } else if !matches!(c, '-' | '_' | '.' | '\'' | '’') {
                m.symbols += 1;
            }
            if let Some(p) = prev {
                if p.is_alphabetic() && c.is_ascii_digit()
                    || p.is_ascii_digit() && c.is_alphabetic()
                {
                    m.transitions += 1;
                }
            }
            prev = Some(c);
        }
        m
    }

    fn classes(&self) -> usize {
        [self.lower, self.upper, self.digits, self.symbols]
            .iter()
            .filter(|n| **n > 0)
            .count()
    }
}

/// How much a value must look like a secret, from what its context says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Strictness {
    /// `label: value` with nothing after the value on its line: any value that is not a word.
    Weak,
    /// `label is value`, or prose follows the value: letters mixed with digits or symbols.
    Strong,
    /// No separator at all (`口令 Qw7zLp2Vn9`, a value before a final copula): clearly random.
    Strict,
}

/// Whether `raw` (a value as found, trailing punctuation included) is shaped like a secret at
/// `strictness`, after a label that is (`pin`) or is not a PIN label.
pub(crate) fn secret_shaped(raw: &str, strictness: Strictness, pin: bool) -> bool {
    let v = raw
        .trim_matches(['"', '\'', '`'])
        .trim_end_matches(['.', ':', '!', '?', ',', ';', ')']);
    if v.is_empty() {
        return false;
    }
    let m = Makeup::of(v);
    // Cheap rejections first: most words after a label are plain words.
    let plain_word = m.digits == 0 && m.symbols == 0 && m.humps == 0;
    if plain_word && m.chars < 16 || m.chars < 4 || strictness == Strictness::Strict && m.chars < 8
    {
        return false;
    }
    if is_placeholder(v) {
        return false;
    }
    // A hyphenated description ("SHA256-hashed", "base64-encoded", "JWT-based").
    if let Some((_, last)) = v.split_once('-')
        && last.chars().count() >= 3
        && last.chars().all(char::is_lowercase)
        && m.symbols == 0
    {
        return false;
    }
    // A number with a unit (`90days`, `12px`, `30s`), a version (`v1.2.3`, `1.2.3`), a date.
    if is_quantity(v) {
        return false;
    }
    // A field name made of words (`passwordHash`, `accessToken`): no digit, no symbol, and it
    // names a credential itself.
    if m.digits == 0 && m.symbols == 0 {
        let l = v.to_lowercase();
        if ["pass", "token", "secret", "key", "pwd", "auth", "cred"]
            .iter()
            .any(|w| l.contains(w))
        {
            return false;
        }
    }
    // A kebab-case name (`gpt-4o-mini`, `node-20-alpine`, `db-creds-v2`) named in prose: a value
    // only where nothing but the value follows the label.
    if strictness != Strictness::Weak && is_kebab_name(v) {
        return false;
    }
    let digits_only = m.digits == m.chars;
    if digits_only {
        return m.chars >= if pin { 4 } else { 6 } && strictness != Strictness::Strict
            || m.chars >= 8;
    }
    let weak = m.chars >= 4 && (m.digits > 0 || m.symbols > 0 || m.humps > 0);
    let long_random = m.chars >= 16 && m.letters > 0 && (m.humps >= 2 || m.digits > 0);
    match strictness {
        Strictness::Weak => weak || long_random,
        Strictness::Strong => {
            m.chars >= 6
                && (m.letters > 0 && m.digits > 0
                    || m.symbols > 0 && m.letters + m.digits >= 4
                    || m.humps >= 2)
                || long_random
        }
        Strictness::Strict => {
            // A bare hex string is a commit or a content hash more often than a secret.
            !v.chars()
                .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
                && m.chars >= 8
                && m.letters > 0
                && (m.symbols > 0 && m.digits > 0
                    || m.transitions >= 2
                    || m.classes() >= 3 && m.digits >= 2
                    || m.humps >= 2 && m.digits > 0)
                || long_random && m.transitions >= 2
        }
    }
}

/// `gpt-4o-mini`, `node-20-alpine`, `ubuntu-22.04`: small letters, digits and `.`, in parts
/// joined by `-`, the first a word.
fn is_kebab_name(v: &str) -> bool {
    v.contains('-')
        && v.chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '-' | '.'))
        && v.split('-')
            .next()
            .is_some_and(|first| first.len() >= 2 && first.chars().all(|c| c.is_ascii_lowercase()))
}

/// Words in a qualifier that make the line about the credential rather than a credential: its
/// name, length, policy, format, expiry, scope, where it is kept (`secret name: db-creds-v2`,
/// `token expiry: 2025-12-31`, `Passwort-Richtlinie: …`, `密码长度：…`).
const META_WORDS: &[&str] = &[
    "name",
    "names",
    "length",
    "policy",
    "policies",
    "format",
    "expiry",
    "expires",
    "expiration",
    "lifetime",
    "ttl",
    "scope",
    "scopes",
    "type",
    "types",
    "field",
    "fields",
    "column",
    "header",
    "hash",
    "hashing",
    "hashed",
    "hint",
    "rule",
    "rules",
    "rotation",
    "limit",
    "limits",
    "budget",
    "count",
    "size",
    "prefix",
    "reset",
    "requirements",
    "strength",
    "длина",
    "срок",
    "формат",
    "имя",
    "название",
    "политика",
    "требования",
    "сброс",
    "поле",
    "länge",
    "richtlinie",
    "format",
    "ablauf",
    "feld",
    "longitud",
    "política",
    "nombre",
    "campo",
    "caducidad",
    "comprimento",
    "política",
    "nome",
    "campo",
    "longueur",
    "politique",
    "nom",
    "champ",
    "expiration",
    "lunghezza",
    "politica",
    "nome",
    "campo",
    "scadenza",
    "długość",
    "polityka",
    "nazwa",
    "pole",
    "délka",
    "zásady",
    "název",
    "lengte",
    "beleid",
    "naam",
    "veld",
    "längd",
    "lengde",
    "længde",
    "uzunluğu",
    "politikası",
    "adı",
    "panjang",
    "kebijakan",
    "nama",
    "độ",
    "chính",
];
const META_UNSPACED: &[&str] = &[
    "长度",
    "長度",
    "策略",
    "格式",
    "名称",
    "名稱",
    "有效期",
    "过期",
    "字段",
    "規則",
    "规则",
    "長さ",
    "ポリシー",
    "形式",
    "名前",
    "有効期限",
    "길이",
    "정책",
    "형식",
    "이름",
    "만료",
    "طول",
    "سياسة",
    "اسم",
    "طول",
    "سیاست",
    "نام",
    "אורך",
    "מדיניות",
    "שם",
    "लंबाई",
    "नीति",
    "ความยาว",
    "นโยบาย",
];

/// Whether a window (the text between a label and its separator) makes the line about the
/// credential: one of its words is in [`META_WORDS`], or it holds one of [`META_UNSPACED`].
fn window_is_meta(window: &str) -> bool {
    if window.len() < 2 {
        return false;
    }
    window
        .split(|c: char| c.is_whitespace() || matches!(c, '-' | '_' | '(' | ')'))
        .any(is_meta)
}

/// Whether a qualifier word makes the line about the credential (see [`META_WORDS`]).
fn is_meta(word: &str) -> bool {
    let w = word.trim_matches(|c: char| !c.is_alphanumeric());
    if w.is_empty() {
        return false;
    }
    if w.is_ascii() {
        META_WORDS.iter().any(|m| m.eq_ignore_ascii_case(w))
    } else {
        let lower = w.to_lowercase();
        META_WORDS.contains(&lower.as_str()) || META_UNSPACED.iter().any(|m| lower.contains(m))
    }
}

/// `90days`, `12px`, `4096`-less units, `v1.2.3`, `1.2.3`, `2024-01-15`, `10:30`, `50%`.
fn is_quantity(v: &str) -> bool {
    let s = v.strip_prefix(['v', 'V']).unwrap_or(v);
    let digits_end = s
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map_or(s.len(), |(i, _)| i);
    if digits_end == 0 {
        return false;
    }
    let rest = &s[digits_end..];
    // a number and a unit of small letters (`90days`, `12px`, `3x`)
    if !rest.is_empty()
        && rest.chars().count() <= 7
        && rest.chars().all(|c| c.is_ascii_lowercase() || c == '%')
    {
        return true;
    }
    // a version, a date, a time: digit groups joined by `.`, `-`, `:`, `/`
    s.contains(['.', '-', ':', '/', '+', '%', ',', '–', '—', '~'])
        && s.chars().all(|c| {
            c.is_ascii_digit()
                || matches!(c, '.' | '-' | ':' | '/' | '+' | '%' | ',' | '–' | '—' | '~')
        })
}

fn labels_regex() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| {
        let mut all: Vec<&str> = ENGLISH_LABELS.to_vec();
        all.extend(OTHER_LABELS);
        all.extend(UNSPACED_LABELS);
        // Longer alternatives first: the regex prefers the first that matches at a position.
        all.sort_by_key(|s| std::cmp::Reverse(s.len()));
        let pattern = format!("(?i)(?:{})", all.join("|"));
        match Regex::new(&pattern) {
            Ok(r) => Some(r),
            Err(e) => {
                tracing::error!(error = %e, "credential label pattern failed to compile");
                None
            }
        }
    })
    .as_ref()
}

fn english_regex() -> Option<&'static Regex> {
    static RE: OnceLock<Option<Regex>> = OnceLock::new();
    RE.get_or_init(|| Regex::new(&format!("(?i)^(?:{})$", ENGLISH_LABELS.join("|"))).ok())
        .as_ref()
}

/// Letters of scripts written without spaces between words (Han, Kana, Hangul, Thai, Lao,
/// Khmer, Myanmar) and of those whose words take attached particles (Arabic, Hebrew, Devanagari,
/// Bengali): no word boundary is needed next to them, and a value stops at them.
fn unspaced(c: char) -> bool {
    matches!(c,
        '\u{0590}'..='\u{06FF}' | '\u{0750}'..='\u{077F}' | '\u{0900}'..='\u{09FF}'
        | '\u{0E00}'..='\u{0EFF}' | '\u{1000}'..='\u{109F}' | '\u{1780}'..='\u{17FF}'
        | '\u{1100}'..='\u{11FF}' | '\u{3040}'..='\u{30FF}' | '\u{3130}'..='\u{318F}'
        | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}'
        | '\u{F900}'..='\u{FAFF}' | '\u{FB1D}'..='\u{FDFF}' | '\u{FE70}'..='\u{FEFF}')
}

/// A letter or digit of a spaced script: what may not touch a Latin, Cyrillic or Greek label.
fn word_char(c: char) -> bool {
    (c.is_alphanumeric() || c == '_') && !unspaced(c)
}

/// Letters of scripts written without any spaces between words (Han, Kana, Hangul, Thai, Lao,
/// Khmer, Myanmar): a qualifier in them is counted in characters, not words.
fn cjk_like(c: char) -> bool {
    matches!(c,
        '\u{0E00}'..='\u{0EFF}' | '\u{1000}'..='\u{109F}' | '\u{1780}'..='\u{17FF}'
        | '\u{1100}'..='\u{11FF}' | '\u{3040}'..='\u{30FF}' | '\u{3130}'..='\u{318F}'
        | '\u{3400}'..='\u{4DBF}' | '\u{4E00}'..='\u{9FFF}' | '\u{AC00}'..='\u{D7AF}'
        | '\u{F900}'..='\u{FAFF}')
}

/// Sentence punctuation: a qualifier does not run past it. `.`, `,`, `;`, `!` and `?` end a
/// sentence or clause only before white space or the end (`db.prod`, `Ank4ra!06x` go on).
fn stops_window(c: char, next: Option<char>) -> bool {
    match c {
        '。' | '、' | '！' | '？' | '\n' | '\r' => true,
        ',' | ';' | '!' | '?' | '.' => next.is_none_or(char::is_whitespace),
        _ => false,
    }
}

/// Characters that end a value (besides white space and unspaced-script letters).
fn ends_value(c: char) -> bool {
    matches!(
        c,
        ',' | ';' | '"' | '\'' | '`' | ')' | ']' | '}' | '>' | '|' | '。' | '、' | '，'
    )
}

const MAX_WINDOW_WORDS: usize = 7;
const MAX_DASH_WORDS: usize = 5;
const MAX_WINDOW_CHARS: usize = 60;
const MAX_WINDOW_UNSPACED: usize = 16;

/// Every credential value the structural rule finds in `text` (byte ranges of the values). With
/// `first_only`, stops at the first.
pub(crate) fn find_values(text: &str, first_only: bool) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let Some(re) = labels_regex() else {
        return out;
    };
    for m in re.find_iter(text) {
        if let Some(v) = judge(text, m.range()) {
            out.push(v);
            if first_only {
                break;
            }
        }
    }
    out
}

/// The value a label at `label` gives, if it is a credential.
fn judge(text: &str, label: Range<usize>) -> Option<Range<usize>> {
    let word = &text[label.clone()];
    let first = word.chars().next()?;
    let last = word.chars().last()?;
    let before = text[..label.start].chars().next_back();
    let after = text[label.end..].chars().next();
    // A label inside a value (`arn:…:secret:prod/app`, `/etc/token`, `?token=`) is not one.
    if before.is_some_and(|b| matches!(b, ':' | '/' | '\\' | '@' | '=' | '?' | '&' | '%')) {
        return None;
    }
    // Word boundaries for labels of spaced scripts.
    if !unspaced(first)
        && let Some(b) = before
        && b.is_alphanumeric()
        && !unspaced(b)
    {
        let compound = COMPOUND_TAILS.iter().any(|t| word.to_lowercase() == *t);
        if !compound || !b.is_alphabetic() {
            return None;
        }
    }
    if !unspaced(last) && after.is_some_and(word_char) {
        return None;
    }
    let english = english_regex().is_some_and(|r| r.is_match(word));
    // Short words that are also ordinary English (`pass`, `pw`, `pwd`) are labels with their
    // separator right after them (`pass: …`, `pw=…`), or after a short qualifier when what
    // follows the separator is clearly random (`pw for router → Qw7zLp2Vn9`).
    if word.len() <= 4 && TIGHT_LABELS.iter().any(|t| t.eq_ignore_ascii_case(word)) {
        let next = text[label.end..].trim_start_matches([' ', '\t']);
        if !next.starts_with([':', '=', '|']) {
            return qualified_tight_value(text, label.end);
        }
    }
    let pin = is_pin_label(word);
    let line_end = text[label.end..]
        .find('\n')
        .map_or(text.len(), |i| label.end + i);
    let rest = &text[label.end..line_end];

    // Walk the window after the label, looking for a separator.
    let mut words = 0usize;
    let mut unspaced_run = 0usize;
    let mut in_word = false;
    let mut word_start = 0usize;
    let mut chars = rest.char_indices().peekable();
    // (position after the separator, whether it is punctuation, whether it is a dash)
    let mut sep: Option<(usize, bool, bool)> = None;
    let mut seen = 0usize;
    while let Some((i, c)) = chars.peek().copied() {
        seen += 1;
        if seen > MAX_WINDOW_CHARS {
            break;
        }
        let next = rest[i + c.len_utf8()..].chars().next();
        // Punctuation separators.
        match c {
            ':' if next != Some(':') && !rest[i..].starts_with("://") => {
                let len = if rest[i..].starts_with(":=") { 2 } else { 1 };
                sep = Some((i + len, true, false));
                break;
            }
            '=' => {
                let len = if rest[i..].starts_with("=>") || rest[i..].starts_with("==") {
                    2
                } else {
                    1
                };
                sep = Some((i + len, true, false));
                break;
            }
            // Dashes also set off clauses in prose ("… a load pass seeds the env with what —
            // Layer-1 only"): after a qualifier of five words at most, and a value followed by
            // prose must then be clearly random.
            '—' | '–' | '→' | '|' => {
                if words > MAX_DASH_WORDS {
                    return None;
                }
                sep = Some((i + c.len_utf8(), true, true));
                break;
            }
            '-' if !in_word && next.is_some_and(|n| n == ' ' || n == '>' || n == '\t') => {
                if words > MAX_DASH_WORDS {
                    return None;
                }
                let len = if next == Some('>') { 2 } else { 1 };
                sep = Some((i + len, true, true));
                break;
            }
            _ => {}
        }
        if stops_window(c, next) {
            // The word the punctuation ends may be a value without a separator (`jelszava
            // Bp5Xq8Lm!`): judged with the punctuation, which the shape check trims.
            if in_word && c != '\n' && c != '\r' {
                let token = &rest[word_start..i + c.len_utf8()];
                if (words == 0 || !english && token.is_ascii())
                    && secret_shaped(token, Strictness::Strict, pin)
                {
                    return Some(label.end + word_start..label.end + i + c.len_utf8());
                }
            }
            return None;
        }
        if c.is_whitespace() {
            if in_word {
                in_word = false;
                let w = &rest[word_start..i];
                if is_copula(w, english) && !window_is_meta(&rest[..word_start]) {
                    // A copula that is not followed by a value is part of the qualifier ("the
                    // password to the server room: X", "changed to X").
                    if let Some(v) = value_after(text, label.end + i, line_end, false, false, pin) {
                        return Some(v);
                    }
                }
                // A value with no separator, in a different script from the label (`رمز عبور
                // سرور Qw7zLp2Vn9 است`), or right after the label (`口令 Qw7zLp2Vn9`).
                let token = &rest[word_start..i];
                if (words == 0 || !english && token.is_ascii())
                    && secret_shaped(token, Strictness::Strict, pin)
                {
                    return Some(label.end + word_start..label.end + i);
                }
                // Short function words (`de`, `la`, `of`, `для`, `του`) do not count: Romance
                // qualifiers chain them ("de la base de datos de staging").
                if w.chars().count() > 3 {
                    words += 1;
                }
                if words > MAX_WINDOW_WORDS {
                    return None;
                }
            }
            chars.next();
            continue;
        }
        if unspaced(c) {
            // Attached copulas: `密码是`, `パスワードは`, `비밀번호는`.
            if let Some(cop) = ATTACHED_COPULAS.iter().find(|a| rest[i..].starts_with(**a)) {
                let after_cop = i + cop.len();
                // The topic marker must end the word: `는` in `비밀번호는`, not a syllable.
                sep = Some((after_cop, false, false));
                break;
            }
            if cjk_like(c) {
                unspaced_run += 1;
                if unspaced_run > MAX_WINDOW_UNSPACED {
                    return None;
                }
            }
        }
        if !in_word {
            in_word = true;
            word_start = i;
        }
        chars.next();
    }
    let Some((sep_end, punct, dash)) = sep else {
        // The line ended inside the window: a last token may be the value.
        if in_word {
            let token = &rest[word_start..];
            if (words == 0 || !english && token.is_ascii())
                && secret_shaped(token, Strictness::Strict, pin)
            {
                return Some(label.end + word_start..label.end + rest.len());
            }
        }
        return None;
    };
    if window_is_meta(&rest[..sep_end]) {
        return None;
    }
    value_after(text, label.end + sep_end, line_end, punct, dash, pin)
}

/// Words a short label's qualifier may have (`pw for the router`).
const MAX_TIGHT_WORDS: usize = 3;

/// The value after a short ordinary-word label (`pass`, `pw`) and a qualifier of at most
/// [`MAX_TIGHT_WORDS`] words ending at a separator (`:`, `=`, `→`, `->`, `=>`), if that value is
/// clearly random: such a label is ordinary English too often (`pass rate for CI: 98%`) to take a
/// value of any other shape.
fn qualified_tight_value(text: &str, from: usize) -> Option<Range<usize>> {
    let line_end = text[from..].find('\n').map_or(text.len(), |i| from + i);
    let rest = &text[from..line_end];
    let (at, len) = rest
        .char_indices()
        .take(MAX_WINDOW_CHARS)
        .find_map(|(i, c)| match c {
            ':' | '=' | '→' => Some((
                i,
                if rest[i..].starts_with("=>") {
                    2
                } else {
                    c.len_utf8()
                },
            )),
            '-' if rest[i..].starts_with("->") => Some((i, 2)),
            _ => None,
        })?;
    let window = &rest[..at];
    if !window.starts_with([' ', '\t'])
        || window.split_whitespace().count() > MAX_TIGHT_WORDS
        || window
            .chars()
            .any(|c| !(c.is_alphanumeric() || c.is_whitespace() || "-_'’()".contains(c)))
        || window_is_meta(window)
    {
        return None;
    }
    let after = &rest[at + len..];
    let value = after.trim_start_matches([' ', '\t']);
    let start = from + at + len + (after.len() - value.len());
    let end = value
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || unspaced(*c))
        .map_or(line_end, |(i, _)| start + i);
    let raw = &text[start..end];
    let trimmed = raw.trim_end_matches(['.', ',', ';', '!', '?', ')']);
    secret_shaped(trimmed, Strictness::Strict, false).then_some(start..start + trimmed.len())
}

/// The value after a separator ending at `from` (its line ends at `line_end`), if it is a
/// credential.
fn value_after(
    text: &str,
    from: usize,
    line_end: usize,
    punct: bool,
    dash: bool,
    pin: bool,
) -> Option<Range<usize>> {
    let after = &text[from..line_end];
    // White space, and Markdown emphasis (`**Password:** X`, `Пароль: **X**`).
    let trimmed = after.trim_start_matches([' ', '\t', '\r', '*']);
    let start = from + (after.len() - trimmed.len());
    if trimmed.trim().is_empty() {
        // `password:` alone on its line, the value alone on the next.
        if !punct {
            return None;
        }
        let next_start = line_end + 1;
        if next_start >= text.len() {
            return None;
        }
        let next_end = text[next_start..]
            .find('\n')
            .map_or(text.len(), |i| next_start + i);
        let line = &text[next_start..next_end];
        let body = line.trim();
        if body.is_empty() || body.contains(char::is_whitespace) {
            return None;
        }
        let lead = line.len() - line.trim_start().len();
        let s = next_start + lead;
        return secret_shaped(body, Strictness::Weak, pin).then_some(s..s + body.len());
    }
    // A quoted value runs to its closing quote.
    let first = trimmed.chars().next()?;
    if matches!(first, '"' | '\'' | '`' | '«' | '“' | '「') {
        let close = match first {
            '«' => '»',
            '“' => '”',
            '「' => '」',
            q => q,
        };
        let body_start = start + first.len_utf8();
        let body_len = text[body_start..line_end].find(close)?;
        let body = &text[body_start..body_start + body_len];
        if body.contains(char::is_whitespace) {
            return None;
        }
        return secret_shaped(body, Strictness::Weak, pin)
            .then_some(body_start..body_start + body_len);
    }
    if unspaced(first) {
        return None;
    }
    let end = trimmed
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || unspaced(*c) || ends_value(*c))
        .map_or(line_end, |(i, _)| start + i);
    let value = &text[start..end];
    // Trailing sentence punctuation and emphasis are not part of the value.
    let value = value.trim_end_matches(['.', ':', '?', '!', '*']);
    if value.is_empty() {
        return None;
    }
    let end = start + value.len();
    let prose = prose_follows(&text[end..line_end]);
    let strictness = match (punct, prose) {
        (true, false) => Strictness::Weak,
        (_, true) if dash => Strictness::Strict,
        _ => Strictness::Strong,
    };
    if secret_shaped(value, strictness, pin) {
        return Some(start..end);
    }
    // A login and its password: `admin / Na5!Xq8L`.
    let pair = text[end..line_end].trim_start_matches([' ', '\t']);
    let second = pair.strip_prefix('/')?.trim_start_matches([' ', '\t']);
    if !punct || second.is_empty() || value.contains('/') {
        return None;
    }
    let s = line_end - second.len();
    let e = second
        .char_indices()
        .find(|(_, c)| c.is_whitespace() || unspaced(*c) || ends_value(*c))
        .map_or(line_end, |(i, _)| s + i);
    let strictness = if prose_follows(&text[e..line_end]) {
        Strictness::Strong
    } else {
        Strictness::Weak
    };
    secret_shaped(&text[s..e], strictness, pin).then_some(s..e)
}

/// Whether words of a sentence follow a value (`secret: rotation happens monthly`), rather than
/// nothing, punctuation, an unspaced-script word (`です`, `입니다`) or another `key: value`.
fn prose_follows(rest: &str) -> bool {
    let t = rest.trim_start_matches(['.', ',', ';', '!', '?', ')', '"', '\'', '`']);
    if !t.starts_with([' ', '\t']) {
        return false;
    }
    let t = t.trim_start();
    let Some(c) = t.chars().next() else {
        return false;
    };
    if !c.is_alphabetic() || unspaced(c) {
        return false;
    }
    let token = t.split_whitespace().next().unwrap_or("");
    !(token.ends_with(':') || token.contains('='))
}
