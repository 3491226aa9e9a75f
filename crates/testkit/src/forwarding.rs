//! A store wrapper for tests (feature `store`): it forwards every [`MemoryStore`] method to the
//! store it wraps and counts, holds or fails the calls a test names.

use crate::Gate;
use async_trait::async_trait;
use memloop_store::{
    ChangeCursor, Changes, CheckedWrite, ExpectedVersion, IndexEntry, LoadedIndex, LocalDir,
    LocalPurpose, MemoryError, MemoryFile, MemoryHeader, MemoryPath, MemoryScope, MemoryStore,
    StoreDescription, VersionedWrite, WriteLimits, WriteReport,
};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// One method of [`MemoryStore`], as [`Forwarding`] records and hooks it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Method {
    /// [`MemoryStore::describe`].
    Describe,
    /// [`MemoryStore::local_dir`].
    LocalDir,
    /// [`MemoryStore::write_limits`].
    WriteLimits,
    /// [`MemoryStore::approx_bytes`].
    ApproxBytes,
    /// [`MemoryStore::changes`] (the change feed).
    Changes,
    /// [`MemoryStore::scan`].
    Scan,
    /// [`MemoryStore::read_path`].
    ReadPath,
    /// [`MemoryStore::write_checked`] (what `write` calls).
    WriteChecked,
    /// [`MemoryStore::write_checked_if`] (what `write_if` and `write_raw_if` call).
    WriteCheckedIf,
    /// [`MemoryStore::write_checked_batch`].
    WriteCheckedBatch,
    /// [`MemoryStore::delete_checked`].
    DeleteChecked,
    /// [`MemoryStore::rename_checked`].
    RenameChecked,
    /// [`MemoryStore::clear`].
    Clear,
    /// [`MemoryStore::load_index`].
    LoadIndex,
    /// [`MemoryStore::index_entries`].
    IndexEntries,
    /// [`MemoryStore::load_scope_index`].
    LoadScopeIndex,
    /// [`MemoryStore::check_contained`].
    CheckContained,
}

impl Method {
    /// Every method that writes a memory's text: a test that makes "every write" fail names
    /// these (a delete and a clear are not among them).
    pub const WRITES: [Method; 4] = [
        Method::WriteChecked,
        Method::WriteCheckedIf,
        Method::WriteCheckedBatch,
        Method::RenameChecked,
    ];
}

/// One call made on a [`Forwarding`] store: the method and the memory paths it named (a read
/// or delete its path, a write its path, a batch each write's path, a rename `from` then `to`,
/// a containment question its `rel`; none for the others).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The method called.
    pub method: Method,
    /// The memory paths the call named, in argument order.
    pub paths: Vec<String>,
}

/// The calls a [`Forwarding`] store has recorded, in the order they were made.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Calls(pub Vec<Call>);

impl Calls {
    /// How many calls of `method` were made.
    pub fn count(&self, method: Method) -> usize {
        self.0.iter().filter(|c| c.method == method).count()
    }

    /// The paths the calls of `method` named, in call order (repeats kept: a path read twice
    /// is listed twice).
    pub fn paths(&self, method: Method) -> Vec<String> {
        self.0
            .iter()
            .filter(|c| c.method == method)
            .flat_map(|c| c.paths.iter().cloned())
            .collect()
    }
}

/// Where a held call waits at its [`Gate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Before the call reaches the wrapped store: nothing has happened yet.
    Call,
    /// After the wrapped store answered, before the answer is returned: the store was asked
    /// at its state then, and the caller gets that answer only when let through.
    Answer,
}

/// Makes the error an injected failure returns, from the call it fails.
type MakeError = Arc<dyn Fn(&Call) -> MemoryError + Send + Sync>;

/// A [`MemoryStore`] that forwards every method to the store it wraps (its own method, so the
/// wrapped store's batches, renames, change feed and local dirs stay its own) and, for tests:
///
/// - records every call made on it ([`calls`](Self::calls), [`take_calls`](Self::take_calls)),
///   but not the calls the wrapped store makes on itself, nor anything done through
///   [`inner`](Self::inner);
/// - holds the calls of a chosen method at a [`Gate`] until the test lets them through
///   ([`hold`](Self::hold)), before the wrapped store sees them or after it answered;
/// - fails the calls of chosen methods with an error of the test's making
///   ([`fail`](Self::fail)), without the wrapped store seeing them;
/// - makes the change feed carry the text of every memory it reports written
///   ([`carry_texts`](Self::carry_texts)), as a backend whose feed sends texts along does.
///
/// The order inside a call: recorded, held at [`Hold::Call`], failed, forwarded, texts
/// carried, held at [`Hold::Answer`]. The synchronous methods are recorded and (when they
/// return a `Result`: `check_contained`) failed, never held.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")] async fn main() {
/// use memloop_store::{MemoryDoc, MemoryError, MemoryStore, MemoryType, WriteMode};
/// use memloop_testkit::{Forwarding, MapStore, Method};
/// use std::sync::Arc;
///
/// let wrapped = Arc::new(Forwarding::new(MapStore::new()));
/// let store: Arc<dyn MemoryStore> = wrapped.clone();
/// let doc = MemoryDoc::new("Deploys", "when we deploy", MemoryType::Project, "Tuesdays.");
/// store.write("deploy.md", &doc, WriteMode::Overwrite).await.unwrap();
/// store.read("deploy.md").await.unwrap();
/// assert_eq!(wrapped.calls().paths(Method::ReadPath), ["deploy.md"]);
///
/// // Every write fails from now on; reads still reach the map.
/// wrapped.fail(Method::WRITES, |call| MemoryError::io(
///     format!("writing {:?}", call.paths),
///     std::io::ErrorKind::ReadOnlyFilesystem.into(),
/// ));
/// assert!(store.write("deploy.md", &doc, WriteMode::Overwrite).await.is_err());
/// assert!(store.read("deploy.md").await.is_ok());
/// # }
/// ```
pub struct Forwarding<S: ?Sized = dyn MemoryStore> {
    inner: Arc<S>,
    calls: Mutex<Vec<Call>>,
    gates: Mutex<HashMap<Method, (Hold, Arc<Gate>)>>,
    failures: Mutex<HashMap<Method, MakeError>>,
    carry: AtomicBool,
}

/// A lock that survives a test's panic while holding it (every change is one push or insert).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl<S: MemoryStore> Forwarding<S> {
    /// Wraps `inner`, with nothing held or failed.
    pub fn new(inner: S) -> Self {
        Self::over(Arc::new(inner))
    }
}

impl<S: MemoryStore + ?Sized> Forwarding<S> {
    /// Wraps a store already shared (`Arc<dyn MemoryStore>` too), with nothing held or failed.
    pub fn over(inner: Arc<S>) -> Self {
        Self {
            inner,
            calls: Mutex::default(),
            gates: Mutex::default(),
            failures: Mutex::default(),
            carry: AtomicBool::new(false),
        }
    }

    /// The wrapped store: what a test does through it is neither recorded, held nor failed.
    pub fn inner(&self) -> &Arc<S> {
        &self.inner
    }

    /// The calls recorded so far.
    pub fn calls(&self) -> Calls {
        Calls(lock(&self.calls).clone())
    }

    /// The calls recorded so far, and a fresh record from here on.
    pub fn take_calls(&self) -> Calls {
        Calls(std::mem::take(&mut *lock(&self.calls)))
    }

    /// How many calls of `method` were recorded so far.
    pub fn count(&self, method: Method) -> usize {
        lock(&self.calls)
            .iter()
            .filter(|c| c.method == method)
            .count()
    }

    /// Hold every later call of `method` (an async one) at a new closed [`Gate`], where `at`
    /// says; returns the gate, for the test to wait at and release. Replaces a gate the method
    /// had.
    pub fn hold(&self, method: Method, at: Hold) -> Arc<Gate> {
        let gate = Arc::new(Gate::new());
        lock(&self.gates).insert(method, (at, gate.clone()));
        gate
    }

    /// Stop holding `method`'s later calls (calls held now stay held until their gate lets
    /// them through).
    pub fn unhold(&self, method: Method) {
        lock(&self.gates).remove(&method);
    }

    /// Fail every later call of each of `methods` with the error `error` makes from the call;
    /// the wrapped store does not see them. Replaces a failure a method had.
    pub fn fail(
        &self,
        methods: impl IntoIterator<Item = Method>,
        error: impl Fn(&Call) -> MemoryError + Send + Sync + 'static,
    ) {
        let error: MakeError = Arc::new(error);
        let mut failures = lock(&self.failures);
        for method in methods {
            failures.insert(method, error.clone());
        }
    }

    /// Let each of `methods` reach the wrapped store again.
    pub fn heal(&self, methods: impl IntoIterator<Item = Method>) {
        let mut failures = lock(&self.failures);
        for method in methods {
            failures.remove(&method);
        }
    }

    /// Whether the change feed's answers carry the text of every memory they report written
    /// (read from the wrapped store, not recorded): consumers then need not read them.
    pub fn carry_texts(&self, carry: bool) {
        self.carry.store(carry, Ordering::SeqCst);
    }

    /// Records a call.
    fn record(&self, method: Method, paths: Vec<String>) -> Call {
        let call = Call { method, paths };
        lock(&self.calls).push(call.clone());
        call
    }

    /// The gate `method`'s calls are held at, if at `at`.
    fn gate(&self, method: Method, at: Hold) -> Option<Arc<Gate>> {
        lock(&self.gates)
            .get(&method)
            .filter(|(hold, _)| *hold == at)
            .map(|(_, gate)| gate.clone())
    }

    /// The injected failure of this call, if its method has one.
    fn failure(&self, call: &Call) -> Option<MemoryError> {
        let make = lock(&self.failures).get(&call.method).cloned();
        make.map(|make| make(call))
    }

    /// Runs one async call: recorded, held before, failed or forwarded (`forward`), held after.
    async fn call<T, F>(
        &self,
        method: Method,
        paths: Vec<String>,
        forward: F,
    ) -> Result<T, MemoryError>
    where
        F: std::future::Future<Output = Result<T, MemoryError>>,
    {
        let call = self.record(method, paths);
        if let Some(gate) = self.gate(method, Hold::Call) {
            gate.pass().await;
        }
        if let Some(error) = self.failure(&call) {
            return Err(error);
        }
        let answer = forward.await;
        if let Some(gate) = self.gate(method, Hold::Answer) {
            gate.pass().await;
        }
        answer
    }

    /// `answer` with the text of every written memory it reports, read from the wrapped store.
    async fn carried(&self, mut answer: Changes) -> Result<Changes, MemoryError> {
        if let Changes::Changed { written, files, .. } = &mut answer {
            for header in written.iter() {
                if files.iter().all(|f| f.header.rel_path != header.rel_path) {
                    let path = MemoryPath::new(&header.rel_path)?;
                    files.push(self.inner.read_path(&path).await?);
                }
            }
        }
        Ok(answer)
    }
}

/// The path of a memory path, owned.
fn owned(path: &MemoryPath) -> String {
    path.as_str().to_owned()
}

#[async_trait]
impl<S: MemoryStore + ?Sized> MemoryStore for Forwarding<S> {
    fn describe(&self) -> StoreDescription {
        self.record(Method::Describe, Vec::new());
        self.inner.describe()
    }

    fn local_dir(&self, purpose: LocalPurpose) -> LocalDir {
        self.record(Method::LocalDir, Vec::new());
        self.inner.local_dir(purpose)
    }

    fn write_limits(&self) -> WriteLimits {
        self.record(Method::WriteLimits, Vec::new());
        self.inner.write_limits()
    }

    fn approx_bytes(&self) -> usize {
        self.record(Method::ApproxBytes, Vec::new());
        self.inner.approx_bytes()
    }

    async fn changes(&self, since: Option<&ChangeCursor>) -> Result<Changes, MemoryError> {
        self.call(Method::Changes, Vec::new(), async {
            let answer = self.inner.changes(since).await?;
            if self.carry.load(Ordering::SeqCst) {
                self.carried(answer).await
            } else {
                Ok(answer)
            }
        })
        .await
    }

    async fn scan(&self) -> Result<Vec<MemoryHeader>, MemoryError> {
        self.call(Method::Scan, Vec::new(), self.inner.scan()).await
    }

    async fn read_path(&self, path: &MemoryPath) -> Result<MemoryFile, MemoryError> {
        self.call(
            Method::ReadPath,
            vec![owned(path)],
            self.inner.read_path(path),
        )
        .await
    }

    async fn write_checked(&self, write: CheckedWrite) -> Result<WriteReport, MemoryError> {
        let paths = vec![owned(write.path())];
        self.call(Method::WriteChecked, paths, self.inner.write_checked(write))
            .await
    }

    async fn write_checked_if(
        &self,
        write: CheckedWrite,
        expected: &ExpectedVersion,
    ) -> Result<VersionedWrite, MemoryError> {
        let paths = vec![owned(write.path())];
        let forward = self.inner.write_checked_if(write, expected);
        self.call(Method::WriteCheckedIf, paths, forward).await
    }

    async fn write_checked_batch(
        &self,
        writes: Vec<(CheckedWrite, ExpectedVersion)>,
    ) -> Result<Vec<VersionedWrite>, MemoryError> {
        let paths = writes.iter().map(|(w, _)| owned(w.path())).collect();
        let forward = self.inner.write_checked_batch(writes);
        self.call(Method::WriteCheckedBatch, paths, forward).await
    }

    async fn delete_checked(&self, path: &MemoryPath) -> Result<(), MemoryError> {
        let forward = self.inner.delete_checked(path);
        self.call(Method::DeleteChecked, vec![owned(path)], forward)
            .await
    }

    async fn rename_checked(
        &self,
        from: &MemoryPath,
        to: CheckedWrite,
    ) -> Result<WriteReport, MemoryError> {
        let paths = vec![owned(from), owned(to.path())];
        let forward = self.inner.rename_checked(from, to);
        self.call(Method::RenameChecked, paths, forward).await
    }

    async fn clear(&self) -> Result<Vec<String>, MemoryError> {
        self.call(Method::Clear, Vec::new(), self.inner.clear())
            .await
    }

    async fn load_index(&self) -> Result<LoadedIndex, MemoryError> {
        self.call(Method::LoadIndex, Vec::new(), self.inner.load_index())
            .await
    }

    async fn index_entries(&self) -> Result<Vec<IndexEntry>, MemoryError> {
        self.call(Method::IndexEntries, Vec::new(), self.inner.index_entries())
            .await
    }

    async fn load_scope_index(&self, scope: MemoryScope) -> Result<LoadedIndex, MemoryError> {
        let forward = self.inner.load_scope_index(scope);
        self.call(Method::LoadScopeIndex, Vec::new(), forward).await
    }

    fn check_contained(&self, rel: &str) -> Result<MemoryPath, MemoryError> {
        let call = self.record(Method::CheckContained, vec![rel.to_owned()]);
        match self.failure(&call) {
            Some(error) => Err(error),
            None => self.inner.check_contained(rel),
        }
    }
}
