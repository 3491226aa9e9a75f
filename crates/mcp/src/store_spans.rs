//! A span for every store call a tool makes: each store the server opens
//! ([`Projects`](crate::projects::Projects) wraps it once, where it is opened) is served through
//! [`TracedStore`], and its batch writer through [`TracedBatches`]. Each call is an internal span
//! `store {method}` (`memloop.store.operation` = the method: `scan`, `read_path`,
//! `write_checked_if`, `write_batch`, ...) with `error.type` when it fails; never a path, a
//! memory's text or a query.

use crate::batch::{AnswerOf, AtomicBatches, BatchFuture, NamesFuture, SaveKey};
use async_trait::async_trait;
use memloop_store::{
    ChangeCursor, Changes, CheckedWrite, ExpectedVersion, IndexEntry, LoadedIndex, LocalDir,
    LocalPurpose, MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryScope, MemoryStore,
    StoreDescription, VersionedWrite, WriteLimits, WriteReport,
};
use std::sync::Arc;
use tracing::Instrument;

/// The span of store call `operation`.
fn span(operation: &'static str) -> tracing::Span {
    tracing::info_span!(
        "store",
        otel.name = %format!("store {operation}"),
        otel.kind = "internal",
        otel.status_code = tracing::field::Empty,
        memloop.store.operation = operation,
        error.type = tracing::field::Empty,
    )
}

/// Run `call` (store call `operation`) inside its span; a failure is recorded by its kind.
async fn traced<T, E>(
    operation: &'static str,
    call: impl std::future::Future<Output = Result<T, E>>,
) -> Result<T, E> {
    let span = span(operation);
    let result = call.instrument(span.clone()).await;
    if result.is_err() {
        span.record("error.type", "store_error");
        span.record("otel.status_code", "ERROR");
    }
    result
}

/// A store whose every call is a span ([`traced`]); it forwards each [`MemoryStore`] method,
/// the provided ones too, to the store it wraps.
pub(crate) struct TracedStore(pub(crate) Arc<dyn MemoryStore>);

#[async_trait]
impl MemoryStore for TracedStore {
    fn describe(&self) -> StoreDescription {
        self.0.describe()
    }

    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        self.0.local_dir(purpose)
    }

    fn write_limits(&self) -> WriteLimits {
        self.0.write_limits()
    }

    fn approx_bytes(&self) -> usize {
        self.0.approx_bytes()
    }

    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        traced("changes", self.0.changes(since)).await
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        traced("scan", self.0.scan()).await
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        traced("read_path", self.0.read_path(path)).await
    }

    async fn read_paths(&self, paths: &[MemoryPath]) -> Vec<Result<MemoryFile, MemoryError>> {
        // One span for the whole read; a missing memory is an answer, not the call's failure.
        self.0
            .read_paths(paths)
            .instrument(span("read_paths"))
            .await
    }

    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        traced("write_checked", self.0.write_checked(write)).await
    }

    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        traced("write_checked_if", self.0.write_checked_if(write, expected)).await
    }

    async fn write_checked_batch(
        &self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
    ) -> Result<Vec<VersionedWrite>, MemoryError> {
        traced("write_checked_batch", self.0.write_checked_batch(writes)).await
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        traced("delete_checked", self.0.delete_checked(path)).await
    }

    async fn rename_checked(
        &self,
        from: &MemoryPath,
        to: CheckedWrite,
    ) -> Result<WriteReport, MemoryError> {
        traced("rename_checked", self.0.rename_checked(from, to)).await
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        traced("clear", self.0.clear()).await
    }

    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        traced("load_index", self.0.load_index()).await
    }

    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        traced("index_entries", self.0.index_entries()).await
    }

    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        traced("load_scope_index", self.0.load_scope_index(scope)).await
    }

    fn check_contained(&self, rel: &str) -> Result<MemoryPath, MemoryError> {
        self.0.check_contained(rel)
    }
}

/// A batch writer whose every call is a span, as [`TracedStore`]'s.
pub(crate) struct TracedBatches(pub(crate) Arc<dyn AtomicBatches>);

impl AtomicBatches for TracedBatches {
    fn write_batch<'a>(
        &'a self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
        key: Option<&'a SaveKey>,
        answer: AnswerOf<'a>,
    ) -> BatchFuture<'a> {
        Box::pin(traced(
            "write_batch",
            self.0.write_batch(writes, key, answer),
        ))
    }

    fn names<'a>(&'a self, rels: &'a [&'a str]) -> NamesFuture<'a> {
        Box::pin(traced("names", self.0.names(rels)))
    }
}
