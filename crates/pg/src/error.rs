//! [`PgError`]: what can go wrong talking to the team store, and how it maps onto
//! [`MemoryError`].

use memloop_store::MemoryError;

/// Errors of the PostgreSQL backend. Messages never contain the connection password.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PgError {
    /// The connection URL could not be parsed.
    #[error("invalid database URL: {0}")]
    InvalidUrl(String),
    /// The project id breaks the rule [`validate_project_id`](crate::validate_project_id) states.
    #[error("invalid team project id: {0}")]
    InvalidProject(String),
    /// The server could not be reached or refused the connection (down, wrong host, wrong
    /// database, authentication failed).
    #[error("cannot connect to the team memory database: {0}")]
    Connect(String),
    /// TLS could not be set up or the server's certificate was refused (not signed by the root
    /// certificate, not naming the host, unreadable root file). Not retried.
    #[error("TLS to the team memory database failed: {0}")]
    Tls(String),
    /// The role lacks a permission the store needs (creating its tables, reading or writing rows).
    #[error("the team memory database refused the operation (missing permission?): {0}")]
    Permission(String),
    /// A write or delete was based on a version that is no longer the current one: another
    /// writer changed the memory since it was read. Nothing was written.
    #[error(
        "conflict on `{rel_path}`: expected version {expected}, but the team store has {actual}; re-read it and retry"
    )]
    Conflict {
        /// The memory.
        rel_path: String,
        /// The version the write was based on (`none` when it expected the memory to be absent).
        expected: VersionLabel,
        /// The current version (`none` when the memory is absent).
        actual: VersionLabel,
    },
    /// A migration failed; the schema is left at the last complete version.
    #[error("migration {version} failed: {message}")]
    Migration {
        /// The migration's version.
        version: i32,
        /// The server's message.
        message: String,
    },
    /// The database schema is newer than this build understands.
    #[error("the team memory schema is at version {found}, newer than this build's {known}")]
    SchemaTooNew {
        /// Version in the database.
        found: i32,
        /// Newest version this build knows.
        known: i32,
    },
    /// A connection was lost and the operation could not be confirmed after retrying.
    #[error("the team memory database connection was lost: {0}")]
    ConnectionLost(String),
    /// Any other database error.
    #[error("team memory database error: {0}")]
    Db(String),
}

/// A version in an error message: a number or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionLabel(pub Option<i64>);

impl std::fmt::Display for VersionLabel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(v) => write!(f, "{v}"),
            None => f.write_str("none"),
        }
    }
}

impl PgError {
    /// Classify a driver error: connection failures, permission errors and the rest.
    pub(crate) fn from_db(e: &tokio_postgres::Error) -> Self {
        if let Some(db) = e.as_db_error() {
            let code = db.code().code();
            if code == "42501" {
                return Self::Permission(db.message().to_owned());
            }
            if code.starts_with("28") || code.starts_with("3D") {
                // Authentication failed, or no such database.
                return Self::Connect(db.message().to_owned());
            }
            if code.starts_with("08") || code.starts_with("57P") {
                return Self::ConnectionLost(db.message().to_owned());
            }
            return Self::Db(format!("{} ({code})", db.message()));
        }
        // A certificate refused by this crate's verifier: the message says why.
        if let Some(tls) =
            std::error::Error::source(e).and_then(|s| s.downcast_ref::<TlsHandshakeError>())
        {
            return Self::Tls(tls.0.clone());
        }
        if e.is_closed() {
            return Self::ConnectionLost(e.to_string());
        }
        Self::ConnectionLost(format!("{e}"))
    }

    /// Whether retrying on a fresh connection can help.
    pub(crate) fn is_connection(&self) -> bool {
        matches!(self, Self::ConnectionLost(_) | Self::Connect(_))
    }

    /// The conflict details, when this is a [`PgError::Conflict`].
    pub fn as_conflict(&self) -> Option<(&str, Option<i64>, Option<i64>)> {
        match self {
            Self::Conflict {
                rel_path,
                expected,
                actual,
            } => Some((rel_path, expected.0, actual.0)),
            _ => None,
        }
    }

    /// The `PgError` inside a [`MemoryError::Backend`], if any (to tell a conflict from other
    /// failures after a [`MemoryStore`](memloop_store::MemoryStore) call).
    pub fn from_memory_error(e: &MemoryError) -> Option<&PgError> {
        match e {
            MemoryError::Backend { source, .. } => source.downcast_ref::<PgError>(),
            _ => None,
        }
    }
}

impl From<PgError> for MemoryError {
    fn from(e: PgError) -> Self {
        MemoryError::Backend {
            backend: "postgres",
            source: Box::new(e),
        }
    }
}

/// A store operation's error: either a memory rule (name, secret, not found) or the backend.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A memory rule refused the operation (invalid name, secret, not found, ...).
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The database failed or refused (conflict, connection, permission).
    #[error(transparent)]
    Pg(#[from] PgError),
}

impl From<StoreError> for MemoryError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Memory(m) => m,
            StoreError::Pg(p) => p.into(),
        }
    }
}

impl StoreError {
    /// The conflict details, when the database refused a stale write.
    pub fn as_conflict(&self) -> Option<(&str, Option<i64>, Option<i64>)> {
        match self {
            Self::Pg(p) => p.as_conflict(),
            Self::Memory(_) => None,
        }
    }
}

/// Why a TLS connection to PostgreSQL failed (certificate refused, handshake error).
#[derive(Debug)]
pub(crate) struct TlsHandshakeError(pub(crate) String);

impl std::fmt::Display for TlsHandshakeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsHandshakeError {}
