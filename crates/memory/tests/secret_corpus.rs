//! The secret filter against a table of credential lines (every one refused, the error naming
//! the pattern and never the value) and a table of harmless lines that talk about passwords,
//! tokens and secrets (every one accepted).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_memory::store::{MemoryError, SecretFilter};

/// (line, the secret part that must never appear in the error)
const CREDENTIALS: &[(&str, &str)] = &[
    // The plain assignments that used to slip through.
    ("password = hunter", "hunter"),
    ("wifi password: letmein", "letmein"),
    ("password = x", "= x"),
    ("secret_key: changeme", "changeme"),
    ("token=abc", "abc"),
    ("postgres://admin:S3cretPass@db/x", "S3cretPass"),
    // Assignments in many syntaxes.
    ("DB_PASSWORD=hunter2", "hunter2"),
    ("export GITHUB_TOKEN=abc123def", "abc123def"),
    (
        "export AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMIK7MDENG",
        "wJalrXUtnFEMIK7MDENG",
    ),
    (
        "password: \"correct horse battery staple\"",
        "correct horse",
    ),
    ("\"password\": \"hunter2\"", "hunter2"),
    ("{\"api_key\": \"k-12345\"}", "k-12345"),
    ("api_key = 'abcdef'", "abcdef"),
    ("apiKey: qwerty", "qwerty"),
    ("API key: zxcvbnm", "zxcvbnm"),
    ("client_secret=shhh", "shhh"),
    ("clientSecret: 'topsecret'", "topsecret"),
    ("access_token: tok", "tok"),
    ("refresh_token = r1", "r1"),
    ("auth_token:abcd", "abcd"),
    ("private_key = mykey", "mykey"),
    ("passphrase: opensesame", "opensesame"),
    ("passwd=root", "root"),
    ("pwd=admin", "admin"),
    ("DB_PASS=postgres", "postgres"),
    ("smtp.pass = mailpass", "mailpass"),
    ("credentials: bob:pa55", "pa55"),
    ("password := \"gopher\"", "gopher"),
    ("'password' => 'phpsecret'", "phpsecret"),
    ("$password = \"perlpass\";", "perlpass"),
    ("let token = \"rusty\";", "rusty"),
    ("const SECRET = 'jsvalue'", "jsvalue"),
    ("secret = 42", "42"),
    ("password = 123456", "123456"),
    ("my wifi password: Tr0ub4dor is the one", "Tr0ub4dor"),
    ("Password: letmein", "letmein"),
    ("router admin password=admin123", "admin123"),
    ("AccountKey=abcdEFGH1234==", "abcdEFGH1234"),
    ("Server=db;User Id=sa;Password=Passw0rd;", "Passw0rd"),
    ("Data Source=x;Pwd=odbcpw;", "odbcpw"),
    ("<password>xmlpass</password>", "xmlpass"),
    ("mysql --password=dbpass -u root", "dbpass"),
    ("curl --token abc123 https://api", "abc123"),
    ("login --password hunter2", "hunter2"),
    // Connection strings.
    ("mysql://root:toor@localhost:3306/app", "toor"),
    ("redis://:redispass@cache:6379/0", "redispass"),
    (
        "mongodb+srv://app:M0ngoPw@cluster0.example.net/db",
        "M0ngoPw",
    ),
    ("amqp://guest:guest2@rabbit/", "guest2"),
    ("https://deploy:ghpass@git.example.com/repo.git", "ghpass"),
    ("ftp://user:ftppw@files.example.com", "ftppw"),
    // Well-known token shapes.
    ("key AKIAIOSFODNN7EXAMPLE in use", "AKIAIOSFODNN7"),
    ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "ghp_0123"),
    (
        "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
        "github_pat_11",
    ),
    ("glpat-abcdefghij0123456789", "glpat-abc"),
    (
        "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
        "eyJhbGci",
    ),
    ("xoxb-123456789012-abcdefghij", "xoxb-1234"),
    (
        "https://hooks.slack.com/services/T0001/B0001/abcdefXYZ",
        "abcdefXYZ",
    ),
    ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "sk-ant-api03"),
    ("sk-proj-abcdefghijklmnopqrstuvwx", "sk-proj-abc"),
    ("sk_live_abcdefghijklmnop1234", "sk_live_abc"),
    ("AIzaSyA-abcdefghijklmnopqrstuvwxyz01234", "AIzaSyA"),
    ("npm_abcdefghijklmnopqrstuvwxyz0123456789", "npm_abc"),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "hf_abc"),
    (
        "SG.abcdefghijklmnopqrstuv.abcdefghijklmnopqrstuvwxyz0123456789",
        "SG.abc",
    ),
    (
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
        "abcdefghijklmnop",
    ),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpw"),
    // Private keys.
    ("-----BEGIN RSA PRIVATE KEY-----", "BEGIN RSA"),
    (
        "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n",
        "b3BlbnNzaC1rZXk",
    ),
    ("-----BEGIN EC PRIVATE KEY-----", "BEGIN EC"),
    ("-----BEGIN PRIVATE KEY-----", "-----BEGIN PRIVATE"),
    ("-----BEGIN PGP PRIVATE KEY BLOCK-----", "PGP PRIVATE"),
    ("PuTTY-User-Key-File-3: ssh-ed25519", "ssh-ed25519"),
];

const HARMLESS: &[&str] = &[
    "Run the tests from pwd: /src/app",
    "the user forgot the password reset flow",
    "Passwords are stored in 1Password; never paste them here.",
    "secret: rotation happens monthly",
    "token limits: keep prompts short",
    "max_tokens: 256 for the selector",
    "password = os.environ(\"DB_PASS\")",
    "api_key: ${ANTHROPIC_API_KEY}",
    "token=<redacted>",
    "the JWT expiry bug was in auth.rs",
    "type: feedback",
    "Password resets go through the admin console.",
    "The API token is read from the ANTHROPIC_API_KEY environment variable.",
    "Never commit secrets; use the vault instead.",
    "Tokens expire after one hour, so refresh them before long jobs.",
    "The password policy requires 12 characters.",
    "We rotate the signing secret every quarter.",
    "password: see the team vault entry for staging",
    "Secret: never store credentials in memory files",
    "token: the one from the CI settings page, not a personal one",
    "api key: ask the platform team for one",
    "require_password = true",
    "use_token: false",
    "password = $DB_PASSWORD",
    "password: ${{ secrets.DB_PASSWORD }}",
    "token = {{ vault_token }}",
    "api_key = process.env.API_KEY",
    "api_key = os.environ[\"API_KEY\"]",
    "SECRET_KEY = env(\"DJANGO_SECRET\")",
    "password=****",
    "password: xxxxxx",
    "token = <your token here>",
    "secret = %s",
    "token_path: /etc/app/token",
    "password_file = ~/.config/app/pass",
    "The database url is postgres://localhost/app (no credentials in it).",
    "Connect with postgres://app@db/x and the password from the vault.",
    "Clone https://github.com/acme/app.git to get started.",
    "input_tokens=1200 output_tokens=300 per request",
    "token_count = 4096",
    "The tokenizer splits on whitespace.",
    "Use the --password-file flag instead of --password.",
    "The bypass: skip the cache when debugging",
    "Compass: north is up on the map",
    "User prefers passwordless login via passkeys.",
    "The secret sauce is good tests.",
    "Don't log the auth token in error messages.",
    "The CSRF token is checked in middleware.rs.",
    "An API key is needed for the geocoding service; it lives in the vault.",
    "The password field must be masked in the UI.",
    "Bearer tokens go in the Authorization header.",
    "Private keys stay on the build machine, never in the repo.",
    "Rotate credentials after an incident.",
    "secrets.toml is git-ignored.",
    "The token bucket rate limiter allows 10 req/s.",
    "GitHub tokens start with ghp_ and are refused by the filter.",
    "AWS keys start with AKIA.",
    "Keep the JWT secret out of the frontend bundle.",
    "password reset emails are sent by the notifier service",
    "Ask before changing the secret manager configuration.",
    "The pass rate of the test suite is 98%.",
    "token: a unit of text the model reads",
];

#[test]
fn every_credential_line_is_refused_without_echoing_it() {
    assert!(
        CREDENTIALS.len() >= 60,
        "{} credential lines",
        CREDENTIALS.len()
    );
    let mut missed = Vec::new();
    for (line, secret) in CREDENTIALS {
        match SecretFilter::check(line) {
            Err(MemoryError::SensitiveData { pattern }) => {
                let msg = SecretFilter::check(line).unwrap_err().to_string();
                assert!(msg.contains(&pattern), "{msg}");
                // Short values ("x", "abc") occur in any English sentence; check the distinctive ones
                // and the line itself.
                assert!(
                    secret.len() < 5 || !msg.contains(secret),
                    "the error leaks `{secret}`: {msg}"
                );
                assert!(!msg.contains(line), "the error echoes the line: {msg}");
            }
            other => missed.push(format!("{line:?} -> {other:?}")),
        }
    }
    assert!(
        missed.is_empty(),
        "accepted credentials:\n{}",
        missed.join("\n")
    );
}

#[test]
fn every_harmless_line_is_accepted() {
    assert!(HARMLESS.len() >= 60, "{} harmless lines", HARMLESS.len());
    let refused: Vec<String> = HARMLESS
        .iter()
        .filter_map(|line| SecretFilter::find(line).map(|p| format!("{line:?} -> {p}")))
        .collect();
    assert!(
        refused.is_empty(),
        "refused harmless lines:\n{}",
        refused.join("\n")
    );
}
