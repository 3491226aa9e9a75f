//! memloop's memory for agents on [rig](https://docs.rs/rig-core) 0.44 (work in progress).

pub mod convert;
