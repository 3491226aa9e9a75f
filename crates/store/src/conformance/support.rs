//! What the checks share beyond reading and writing: driving futures from one task, and waiting
//! for a store's clock to move.

use super::checks::{Store, during, read};
use crate::types::{MemoryDoc, WriteMode};
use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

/// A boxed future the checks drive together.
pub(super) type Pinned<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Run `futures` to completion from the calling task, polling each in turn, and return their
/// outputs in order. Each runs until it waits, then the next one runs: an await point inside a
/// store's operation is where another writer gets in, deterministically.
pub(super) async fn join_all<T>(futures: Vec<Pinned<'_, T>>) -> Vec<T> {
    let mut running: Vec<Option<Pinned<'_, T>>> = futures.into_iter().map(Some).collect();
    let mut done: Vec<Option<T>> = running.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (slot, out) in running.iter_mut().zip(done.iter_mut()) {
            if let Some(future) = slot {
                match future.as_mut().poll(cx) {
                    Poll::Ready(value) => {
                        *out = Some(value);
                        *slot = None;
                    }
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

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
