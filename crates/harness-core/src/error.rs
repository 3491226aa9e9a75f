//! The error types of the agent loop: [`AgentError`] for a turn or a forked run, and
//! [`CompactionError`] for a compaction attempt.

use crate::invariants::InvariantError;
use crate::model::ModelError;
use std::sync::Arc;

/// Why a turn (or a forked run) failed.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model call failed.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The conversation breaks an API invariant and no repair pass fixed it.
    #[error(transparent)]
    InvalidConversation(#[from] InvariantError),
    /// A requested compaction failed.
    #[error(transparent)]
    Compaction(#[from] CompactionError),
    /// The context is over the compactor's blocking limit and compaction did not bring it
    /// down; the request was not sent. Compact (`Agent::compact_now`) or start a new session.
    #[error("context too large to send: {0}")]
    ContextBlocked(String),
    /// The turn was cancelled.
    #[error("cancelled")]
    Cancelled,
}

/// Why a compaction attempt failed. Each variant carries its cause.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum CompactionError {
    /// The summariser's forked model call failed.
    #[error("the summary request failed: {0}")]
    Summarizer(#[source] Box<AgentError>),
    /// The conversation is still too long for the summariser after dropping the oldest rounds
    /// `dropped_attempts` times (or nothing was left to drop).
    #[error(
        "the conversation is too long to summarize even after dropping the oldest rounds {dropped_attempts} times"
    )]
    TooLong {
        /// Retries made.
        dropped_attempts: u32,
    },
    /// The summariser answered with no text.
    #[error("the summarizer returned an empty summary")]
    EmptySummary,
    /// The compacted conversation breaks an API invariant (a bug in the strategy).
    #[error("the compacted conversation is invalid: {0}")]
    InvalidResult(#[source] InvariantError),
    /// The compaction was cancelled.
    #[error("compaction cancelled")]
    Cancelled,
    /// Every strategy of the compaction policy declined (their names, in order).
    #[error("no compaction strategy applied (tried: {0})")]
    Declined(String),
    /// A failure of a host-provided compactor.
    #[error("compaction failed: {0}")]
    Custom(#[source] Arc<dyn std::error::Error + Send + Sync>),
}

impl CompactionError {
    /// Wrap the error of a custom [`ContextCompactor`](crate::compaction::ContextCompactor).
    pub fn custom(err: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::Custom(Arc::new(err))
    }
}

impl PartialEq for CompactionError {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Summarizer(a), Self::Summarizer(b)) => a == b,
            (
                Self::TooLong {
                    dropped_attempts: a,
                },
                Self::TooLong {
                    dropped_attempts: b,
                },
            ) => a == b,
            (Self::EmptySummary, Self::EmptySummary) | (Self::Cancelled, Self::Cancelled) => true,
            (Self::InvalidResult(a), Self::InvalidResult(b)) => a == b,
            (Self::Declined(a), Self::Declined(b)) => a == b,
            (Self::Custom(a), Self::Custom(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}
