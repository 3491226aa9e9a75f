//! # memloop-secrets
//!
//! The credential filter every memloop memory writer runs: [`SecretFilter`] finds text that
//! looks like it holds a credential and names the pattern that matched (never the secret);
//! [`redact_secrets`] replaces each credential-shaped span of text already stored with
//! `[redacted: <pattern>]` ([`REDACTED_PREFIX`]), for what leaves the process.
//!
//! ```
//! use memloop_secrets::{SecretFilter, redact_secrets};
//! assert!(SecretFilter::check("the user forgot the password reset flow").is_ok());
//! let refused = SecretFilter::check("db password = hunter22").unwrap_err();
//! assert!(refused.pattern.contains("credential assignment"));
//! let (shown, n) = redact_secrets("deploy with token ghp_abcdefghijklmnopqrstuvwxyz0123456789");
//! assert_eq!(n, 1);
//! assert!(!shown.contains("ghp_abc"));
//! ```
#![warn(missing_docs)]

mod filter;
mod labels;
mod redact;
mod view;

pub use filter::{SECRET_REFUSED_TARGET, SecretFilter, SecretFound};
pub use redact::{REDACTED_PREFIX, redact_secrets};
