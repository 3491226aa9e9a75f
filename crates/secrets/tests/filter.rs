//! The filter's verdicts on a few credential shapes of each kind (refused, naming the pattern and
//! never the secret) and on prose about credentials (accepted). The full corpus is `corpus.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers

use memloop_secrets::{SecretFilter, SecretFound};

#[test]
fn secrets_are_refused_naming_the_pattern_only() {
    let cases = [
        ("password = hunter22", "credential assignment"),
        ("DB_PASSWORD=Sup3rS3cret!", "credential assignment"),
        ("api_key: 9f8e7d6c5b4a39281706", "credential assignment"),
        (
            "\"token\": \"abcdefghijklmnopqrstu\"",
            "credential assignment",
        ),
        ("secret: Zr4nd0m", "credential assignment"),
        (
            "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXk\n",
            "private key",
        ),
        ("-----BEGIN RSA PRIVATE KEY-----", "private key"),
        ("key AKIAIOSFODNN7EXAMPLE in use", "AWS"),
        ("ghp_0123456789abcdefghijABCDEFGHIJ012345", "GitHub"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "GitHub"),
        (
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
            "JSON Web Token",
        ),
        ("xoxb-123456789012-abcdefghij", "Slack"),
        ("sk-ant-api03-abcdefghijklmnopqrstuvwxyz", "sk-"),
        (
            "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
            "bearer",
        ),
    ];
    for (text, pattern) in cases {
        match SecretFilter::check(text) {
            Err(SecretFound { pattern: p }) => {
                assert!(p.contains(pattern), "{text}: {p}");
                let msg = SecretFilter::check(text).unwrap_err().to_string();
                for secret in [
                    "hunter22",
                    "Sup3rS3cret",
                    "9f8e7d6c5b4a",
                    "AKIAIOSFODNN7",
                    "ghp_0123",
                    "eyJhbGci",
                    "abcdefghijklmnopqrstuvwxyz",
                ] {
                    assert!(!msg.contains(secret), "message leaks the secret: {msg}");
                }
            }
            other => panic!("{text}: expected a refusal, got {other:?}"),
        }
    }
}

#[test]
fn descriptive_text_passes() {
    let fine = [
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
    ];
    for text in fine {
        assert!(
            SecretFilter::check(text).is_ok(),
            "{text}: {:?}",
            SecretFilter::find(text)
        );
    }
}

/// The text the benches measure talks about credentials without holding one: every rule runs
/// to the end and none refuses it (a refusal would stop the filter early and flatter the bench).
#[test]
fn the_bench_text_is_accepted_and_left_whole() {
    let text = memloop_testkit::harmless_text(4096);
    assert_eq!(SecretFilter::find(&text), None);
    assert_eq!(memloop_secrets::redact_secrets(&text), (text.clone(), 0));
}
