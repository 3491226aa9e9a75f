//! Waiting for a store's clock to move: what the rules about mtimes share.

use super::checks::{Store, during, read};
use crate::types::{MemoryDoc, WriteMode};
use std::time::{Duration, Instant, SystemTime};

/// How long [`rewrite_until_later`] keeps rewriting a memory whose mtime does not move: far
/// longer than any file system's timestamp granularity (a kernel tick, a second on old ones).
const CLOCK_PATIENCE: Duration = Duration::from_secs(3);

/// Write `rel` (each time with a different body, in `mode`) until a read gives it an mtime
/// later than `after`; its mtime then. A store whose clock is coarser than a write (a file
/// system stamping files once per kernel tick) needs a few writes; one whose mtimes never move
/// fails after [`CLOCK_PATIENCE`]. Every mtime on the way must not be earlier than `after`.
pub(super) async fn rewrite_until_later(
    store: &Store,
    rel: &str,
    fields: &MemoryDoc,
    mode: WriteMode,
    after: SystemTime,
) -> Result<SystemTime, String> {
    let start = Instant::now();
    for attempt in 0u64.. {
        let d = MemoryDoc {
            body: format!("{} · правка {attempt} · révision", fields.body),
            ..fields.clone()
        };
        store
            .write(rel, &d, mode)
            .await
            .map_err(during(format!("rewriting {rel}")))?;
        let mtime = read(store, rel).await?.header.mtime;
        ensure!(
            mtime >= after,
            "a write of {rel} gave it an mtime ({mtime:?}) earlier than one the store reported \
             before the write ({after:?})"
        );
        if mtime > after {
            return Ok(mtime);
        }
        if start.elapsed() > CLOCK_PATIENCE {
            return Err(format!(
                "{} writes of {rel} in {CLOCK_PATIENCE:?}, each changing its text, never gave it \
                 an mtime later than {after:?}: a write must move the mtime forward",
                attempt + 1
            ));
        }
    }
    Err(format!("{rel}: the mtime never moved"))
}
