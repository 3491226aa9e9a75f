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
    /// The turn was cancelled.
    #[error("cancelled")]
    Cancelled,
}
