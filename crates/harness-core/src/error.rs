//! The agent's error type.

use crate::compaction::CompactionError;
use crate::invariants::InvariantError;
use crate::model::ModelError;

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
