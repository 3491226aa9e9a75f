//! Driving several futures from one task, so that an await point inside a store's operation is
//! where another writer gets in, deterministically.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;

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
