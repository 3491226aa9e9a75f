//! Compaction for memloop (see the crate README).
#![warn(missing_docs)]
