//! `context_save`: a batch saved whole or not at all, and once per idempotency key.
//!
//! Every entry is checked first, through the same rules its write applies
//! ([`CheckedWrite::check`] and the store's containment question, plus the tool's own: content,
//! size, title, version): one refused entry refuses the batch and nothing is written. Then the
//! entries are written: on a store with [`AtomicBatches`] (the PostgreSQL team store) in one
//! transaction; on any other (the memory dir) as one batch of that store
//! ([`MemoryStore::write_checked_batch`]: the memory dir's is journaled, so it lands whole even
//! when the process is killed midway, the next open finishing it). See [`crate::batch`] for the
//! idempotency keys.

use crate::answer::McpLimits;
use crate::batch::{Batched, KeyFiles, KeyRecord, PlannedWrite, SaveKey, expiry};
use crate::mapping::{entry_to_memory, legacy_path};
use crate::ops::{
    GLOBAL_PREFIX, Refusal, SaveEntry, expected_of, is_refusal, project_json, refusal_reason,
    unavailable,
};
use crate::projects::{OpenProject, Project, Projects};
use crate::tiers;
use memloop_store::{
    CheckedWrite, ExpectedVersion, MemoryDoc, MemoryError, MemoryFile, MemoryStore, VersionedWrite,
    WriteMode, content_version, title_key,
};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::Arc;

/// One entry, checked and ready to write.
struct Planned<'e> {
    index: usize,
    entry: &'e SaveEntry,
    rel: String,
    doc: MemoryDoc,
    expected: ExpectedVersion,
    /// The memory's text before the batch (`None`: absent), to put it back.
    previous: Option<String>,
}

/// Why an entry is refused: its code and reason.
type EntryRefusal = (usize, &'static str, String);

/// The stores a batch writes to.
struct Targets {
    project: Option<Arc<OpenProject>>,
    global: Option<Arc<OpenProject>>,
}

impl Targets {
    fn of(&self, global: bool) -> Option<&Arc<OpenProject>> {
        if global {
            self.global.as_ref()
        } else {
            self.project.as_ref()
        }
    }
}

/// `context_save`: check every entry, then write all of them or none; with `key`, once.
pub(crate) async fn save(
    projects: &Projects,
    project: Project,
    entries: &[SaveEntry],
    key: Option<SaveKey>,
    limits: McpLimits,
) -> Result<Value, Refusal> {
    if entries.is_empty() {
        return Err(Refusal::new("entries is empty: nothing to save"));
    }
    if entries.len() > limits.max_batch_entries {
        return Err(Refusal::new(format!(
            "{} entries in one batch; at most {}",
            entries.len(),
            limits.max_batch_entries
        )));
    }
    let total: usize = entries.iter().map(|e| e.content.len()).sum();
    if total > limits.max_batch_bytes {
        return Err(Refusal::new(format!(
            "the batch's contents are {total} bytes; at most {} in one call (split it)",
            limits.max_batch_bytes
        )));
    }
    let project_store = if entries.iter().any(|e| !e.global) {
        match projects.open_write(&project, true).await {
            Ok(Some(open)) => Some(open),
            Ok(None) => return Ok(unavailable(&project, "memory dir could not be created")),
            Err(e) => return e.answer(&project),
        }
    } else {
        None
    };
    let global = if entries.iter().any(|e| e.global) {
        projects.open_global(true).await.unwrap_or_else(|e| {
            tracing::warn!(error = %e, "global memory unavailable");
            None
        })
    } else {
        None
    };
    let targets = Targets {
        project: project_store,
        global,
    };
    // The key lives with the project's store (the global one for a batch of global entries).
    let home = targets.project.clone().or_else(|| targets.global.clone());
    let Some(key) = key else {
        return save_once(projects, &project, entries, &targets, None).await;
    };
    let Some(home) = home else {
        return Err(Refusal::new(
            "the global memory dir cannot be opened (no home directory?): nothing was written",
        ));
    };
    if home.batches.is_some() {
        // Recorded in the batch's own transaction.
        return save_once(projects, &project, entries, &targets, Some(&key)).await;
    }
    let files = match KeyFiles::lock(home.store.as_ref()).await {
        Ok(f) => f,
        Err(e) => return Ok(unavailable(&project, e)),
    };
    match files.get(&key.caller, &key.key) {
        Some(r) if r.request_sha256 != key.request_sha256 => Err(key_reused(&key)),
        Some(KeyRecord {
            answer: Some(answer),
            ..
        }) => Ok(replayed(answer, &key)),
        Some(pending) => {
            tracing::info!("finishing a keyed batch left unfinished by an earlier call");
            let answer = finish_plan(projects, &targets, &pending).await;
            let answer = match answer {
                Ok(a) => a,
                Err(e) => return Ok(unavailable(&project, e)),
            };
            let done = KeyRecord {
                answer: Some(answer.clone()),
                plan: Vec::new(),
                ..pending
            };
            if let Err(e) = files.put(&done) {
                tracing::warn!(error = %e, "idempotency key not recorded");
            }
            Ok(replayed(answer, &key))
        }
        None => {
            let answer =
                save_keyed_files(projects, &project, entries, &targets, &key, &files).await;
            drop(files);
            answer
        }
    }
}

fn key_reused(key: &SaveKey) -> Refusal {
    // The key goes back in its own field, which answers echo as sent (never redacted).
    let mut r = Refusal::new(
        "this idempotency_key was already used for a different batch (other entries): nothing \
         was written; use a new key for a new batch, the same key only to retry the same one",
    );
    r.details
        .insert("code".into(), json!("idempotency_key_reused"));
    r.details.insert("idempotency_key".into(), json!(key.key));
    r
}

fn replayed(mut answer: Value, key: &SaveKey) -> Value {
    if let Value::Object(map) = &mut answer {
        map.insert("replayed".into(), json!(true));
        map.insert("idempotency_key".into(), json!(key.key));
    }
    answer
}

/// A keyed batch on stores without transactions: plan, record the plan, write, record the
/// answer. The caller holds the key lock.
async fn save_keyed_files(
    projects: &Projects,
    project: &Project,
    entries: &[SaveEntry],
    targets: &Targets,
    key: &SaveKey,
    files: &KeyFiles,
) -> Result<Value, Refusal> {
    let planned = plan(projects, entries, targets).await?;
    let skeleton = answer_of(projects, project, &planned, &[], Some(key));
    let mut record = KeyRecord {
        caller: key.caller.clone(),
        key: key.key.clone(),
        request_sha256: key.request_sha256.clone(),
        expires: expiry(),
        answer: None,
        plan: planned
            .iter()
            .map(|p| PlannedWrite::new(p.entry.global, &p.rel, &p.doc))
            .collect(),
        pending_answer: skeleton,
    };
    if let Err(e) = files.put(&record) {
        return Ok(unavailable(project, e));
    }
    let answer = write_planned(projects, project, planned, targets, Some(key)).await?;
    if answer["available"] != false {
        record.answer = Some(answer.clone());
        record.plan.clear();
        if let Err(e) = files.put(&record) {
            tracing::warn!(error = %e, "idempotency key not recorded");
        }
    }
    Ok(answer)
}

/// Finish an interrupted keyed batch: write each planned entry not yet as planned (whatever is
/// there now), then answer as the first call would have.
async fn finish_plan(
    projects: &Projects,
    targets: &Targets,
    record: &KeyRecord,
) -> Result<Value, MemoryError> {
    let mut answer = record.pending_answer.clone();
    for (i, w) in record.plan.iter().enumerate() {
        let Some(open) = targets.of(w.global) else {
            return Err(MemoryError::NotFound(w.rel.clone()));
        };
        let doc = w.doc();
        let current = match open.store.read(&w.rel).await {
            Ok(f) => Some(f),
            Err(MemoryError::NotFound(_)) => None,
            Err(e) => return Err(e),
        };
        let landed = current.as_ref().is_some_and(|f| {
            f.header.name.as_deref() == Some(doc.name.as_str())
                && f.body.trim_end() == doc.body.trim_end()
        });
        let version = match current {
            Some(f) if landed => content_version(&f.raw),
            _ => {
                let w = open
                    .store
                    .write_if(&w.rel, &doc, WriteMode::Overwrite, &ExpectedVersion::Any)
                    .await?;
                if let Some(s) = projects.summariser() {
                    s.enqueue(&open.store, &w.report.rel_path);
                }
                w.version
            }
        };
        answer["results"][i]["version"] = json!(version);
    }
    Ok(answer)
}

/// Save without a key, or with one the atomic store records.
async fn save_once(
    projects: &Projects,
    project: &Project,
    entries: &[SaveEntry],
    targets: &Targets,
    key: Option<&SaveKey>,
) -> Result<Value, Refusal> {
    let planned = plan(projects, entries, targets).await?;
    write_planned(projects, project, planned, targets, key).await
}

/// Check every entry; all of them pass, or the batch is refused with each one's verdict.
async fn plan<'e>(
    projects: &Projects,
    entries: &'e [SaveEntry],
    targets: &Targets,
) -> Result<Vec<Planned<'e>>, Refusal> {
    let now = chrono::Utc::now();
    let summariser = projects.summariser();
    let made: Vec<(String, MemoryDoc)> = entries
        .iter()
        .map(|entry| {
            let (rel, mut doc) = entry_to_memory(
                entry.kind,
                entry.title.as_deref(),
                &entry.content,
                &entry.tags,
                now,
            );
            if summariser.is_some() {
                doc.body = tiers::with_pending(&doc.body);
            }
            (rel, doc)
        })
        .collect();
    let legacy: Vec<Option<String>> = entries
        .iter()
        .map(|e| legacy_path(e.kind, e.title.as_deref(), &e.content))
        .collect();
    let known = names_in_tx_store(entries, targets, &made, &legacy).await;
    // On a store without transactions each entry's path is read once, all of them together:
    // whether it holds another title, and the text to put back should a later write fail. The
    // old naming rule's path is read only for an entry whose path holds nothing.
    let paths: Vec<Option<&str>> = made.iter().map(|(rel, _)| Some(rel.as_str())).collect();
    let mut found = read_untransacted(targets, entries, &paths).await;
    let old_paths: Vec<Option<&str>> = (0..entries.len())
        .map(|i| {
            // `legacy_path` gives append-only entries none.
            legacy[i]
                .as_deref()
                .filter(|_| matches!(found[i], Some(Err(_))))
        })
        .collect();
    let mut found_old = read_untransacted(targets, entries, &old_paths).await;
    let mut planned = Vec::new();
    let mut refused: Vec<EntryRefusal> = Vec::new();
    for (i, ((entry, (mut rel, doc)), old)) in entries.iter().zip(made).zip(legacy).enumerate() {
        let target = targets.of(entry.global);
        let mut taken = false;
        let mut read = found[i].take();
        let same_title = |name: Option<&str>| name.map(title_key) == Some(title_key(&doc.name));
        if let Some(o) = target.filter(|_| !entry.kind.append_only()) {
            match known.as_ref().filter(|_| o.batches.is_some()) {
                // The names the store with transactions gave for the whole batch.
                Some(names) => match names.get(&rel) {
                    Some(name) => taken = !same_title(Some(name)),
                    None => {
                        if let Some(old) = old
                            && names.get(&old).is_some_and(|n| same_title(Some(n)))
                        {
                            rel = old; // saved under the old naming rule: update it in place
                        }
                    }
                },
                // The entry's path as read, then the old naming rule's when the new one
                // holds nothing.
                None => match &read {
                    Some(Ok(f)) => taken = !same_title(f.header.name.as_deref()),
                    _ => {
                        if let Some(old) = old
                            && let Some(Ok(f)) = found_old[i].take()
                            && same_title(f.header.name.as_deref())
                        {
                            rel = old;
                            read = Some(Ok(f));
                        }
                    }
                },
            }
        }
        let expected = expected_of(entry.expected_version.as_deref());
        let verdict: Result<ExpectedVersion, (&'static str, String)> = if entry
            .content
            .trim()
            .is_empty()
        {
            Err(("empty_content", "content is empty".to_owned()))
        } else if let Err(Refusal { reason, .. }) = &expected {
            Err(("invalid_version", reason.clone()))
        } else if taken {
            // Only a hash collision of two titles (or a hand-edited name) gets here: refuse
            // rather than replace another entry.
            Err((
                "name_taken",
                format!("{rel} holds an entry with another title; retitle this one"),
            ))
        } else {
            match target {
                None => Err((
                    "unavailable",
                    "the global memory dir cannot be opened (no home directory?)".to_owned(),
                )),
                // The rules of the write itself, run now so that no entry is written unless
                // every one passes them.
                Some(o) => {
                    CheckedWrite::check(&rel, &doc, WriteMode::Overwrite, o.store.write_limits())
                        .and_then(|w| o.store.check_contained(w.path().as_str()))
                        .map(|_| expected.clone().unwrap_or(ExpectedVersion::Any))
                        .map_err(|e| refusal_reason(&e))
                }
            }
        };
        let expected = match verdict {
            Ok(e) => e,
            Err((code, reason)) => {
                refused.push((i, code, reason));
                continue;
            }
        };
        let mut previous = None;
        if target.is_some_and(|o| o.batches.is_none()) {
            // No transaction to check the version in: check it now, and keep the text to put
            // back should a later write fail.
            match read {
                Some(Ok(f)) => previous = Some(f.raw),
                None | Some(Err(MemoryError::NotFound(_))) => {}
                Some(Err(e)) => {
                    let (code, reason) = refusal_reason(&e);
                    refused.push((i, code, reason));
                    continue;
                }
            }
            let current = previous.as_deref().map(content_version);
            if !expected.accepts(current.as_deref()) {
                let e = expected.conflict(&rel, current.as_deref());
                let (code, reason) = refusal_reason(&e);
                refused.push((i, code, reason));
                continue;
            }
        }
        planned.push(Planned {
            index: i,
            entry,
            rel,
            doc,
            expected,
            previous,
        });
    }
    if refused.is_empty() {
        return Ok(planned);
    }
    Err(batch_refusal(entries, &refused, "refused"))
}

/// The memories at `paths` (one per entry; `None`: nothing to read) on each entry's target
/// store without transactions, read together (one `read_many` per store). `None` for an entry
/// with no path, no target, or a target with transactions.
async fn read_untransacted(
    targets: &Targets,
    entries: &[SaveEntry],
    paths: &[Option<&str>],
) -> Vec<Option<Result<MemoryFile, MemoryError>>> {
    let mut out: Vec<Option<Result<MemoryFile, MemoryError>>> =
        (0..entries.len()).map(|_| None).collect();
    for global in [false, true] {
        let Some(o) = targets.of(global).filter(|o| o.batches.is_none()) else {
            continue;
        };
        let (asked, rels): (Vec<usize>, Vec<&str>) = (0..entries.len())
            .filter(|&i| entries[i].global == global)
            .filter_map(|i| Some((i, paths[i]?)))
            .unzip();
        if rels.is_empty() {
            continue;
        }
        for (i, file) in asked.into_iter().zip(o.store.read_many(&rels).await) {
            out[i] = Some(file);
        }
    }
    out
}

/// The names at the paths of the batch's entries on the project's store with transactions
/// (each entry's path and the old naming rule's), in one round trip for the whole batch; `None`
/// when there is no such store or the names could not be read (each entry then reads its
/// paths).
async fn names_in_tx_store(
    entries: &[SaveEntry],
    targets: &Targets,
    made: &[(String, MemoryDoc)],
    legacy: &[Option<String>],
) -> Option<HashMap<String, String>> {
    let batches = targets.project.as_ref()?.batches.as_ref()?;
    let mut rels: Vec<&str> = Vec::new();
    for ((entry, (rel, _)), old) in entries.iter().zip(made).zip(legacy) {
        if !entry.global && !entry.kind.append_only() {
            rels.push(rel);
            rels.extend(old.as_deref());
        }
    }
    if rels.is_empty() {
        return None;
    }
    match batches.names(&rels).await {
        Ok(names) => Some(names),
        Err(e) => {
            tracing::warn!(error = %e, "names of the batch's paths not read; reading each entry");
            None
        }
    }
}

/// The refusal of a whole batch: each refused entry with its code and reason, the others
/// `not_written`.
fn batch_refusal(entries: &[SaveEntry], refused: &[EntryRefusal], what: &str) -> Refusal {
    for (i, code, _) in refused {
        tracing::info!(entry = i, code, "context_save entry refused");
    }
    let results: Vec<Value> = entries
        .iter()
        .enumerate()
        .map(|(i, e)| match refused.iter().find(|r| r.0 == i) {
            Some((_, code, reason)) => json!({
                "index": i, "type": e.kind.as_str(), "status": "refused",
                "code": code, "reason": reason,
            }),
            None => json!({ "index": i, "type": e.kind.as_str(), "status": "not_written" }),
        })
        .collect();
    let mut r = Refusal::new(format!(
        "{} of {} entries {what}; nothing was written (a batch is saved whole or not at all): \
         fix or drop the refused entries and save the batch again",
        refused.len(),
        entries.len()
    ));
    r.details.insert("code".into(), json!("batch_refused"));
    r.details.insert("written".into(), json!(0));
    r.details
        .insert("refused_entries".into(), json!(refused.len()));
    r.details.insert("results".into(), json!(results));
    r
}

/// The answer for `planned`, with the versions of `written` (by position; none yet when empty).
fn answer_of(
    projects: &Projects,
    project: &Project,
    planned: &[Planned<'_>],
    written: &[VersionedWrite],
    key: Option<&SaveKey>,
) -> Value {
    let summaries = projects.summariser().is_some();
    let results: Vec<Value> = planned
        .iter()
        .enumerate()
        .map(|(n, p)| {
            let created = written
                .get(n)
                .map_or(p.previous.is_none(), |w| w.report.created);
            let path = if p.entry.global {
                format!("{GLOBAL_PREFIX}{}", p.rel)
            } else {
                p.rel.clone()
            };
            json!({
                "index": p.index, "type": p.entry.kind.as_str(), "status": "written",
                "path": path, "created": created, "global": p.entry.global,
                "replaced": !created && !p.entry.kind.append_only(),
                "version": written.get(n).map(|w| w.version.clone()),
                "memory_type": p.doc.memory_type.map(|t| t.as_str()),
                "summary_state": if summaries { "pending" } else { "none" },
            })
        })
        .collect();
    let mut v = json!({
        "project": project_json(project),
        "available": true,
        "written": planned.len(),
        "refused": 0,
        "results": results,
    });
    if let (Value::Object(map), Some(key)) = (&mut v, key) {
        map.insert("idempotency_key".into(), json!(key.key));
        map.insert("replayed".into(), json!(false));
    }
    v
}

/// Write checked entries: those on each store without transactions as one batch of it
/// ([`MemoryStore::write_checked_batch`]), then those on a store with transactions in one
/// transaction; a later failure puts back what an earlier store wrote.
async fn write_planned(
    projects: &Projects,
    project: &Project,
    planned: Vec<Planned<'_>>,
    targets: &Targets,
    key: Option<&SaveKey>,
) -> Result<Value, Refusal> {
    let atomic = |p: &Planned<'_>| targets.of(p.entry.global).and_then(|o| o.batches.clone());
    let mut written: Vec<Option<VersionedWrite>> = vec![None; planned.len()];
    // 1. Stores without transactions: each store's entries as one batch of that store
    //    (`write_checked_batch`: the memory dir's lands whole even through a crash); should the
    //    second store's fail, the first's are put back.
    let mut done: Vec<usize> = Vec::new();
    for global in [false, true] {
        let Some(o) = targets.of(global) else {
            continue;
        };
        let mine: Vec<usize> = (0..planned.len())
            .filter(|n| planned[*n].entry.global == global && atomic(&planned[*n]).is_none())
            .collect();
        if mine.is_empty() {
            continue;
        }
        let mut writes = Vec::with_capacity(mine.len());
        for n in &mine {
            let p = &planned[*n];
            match CheckedWrite::check(&p.rel, &p.doc, WriteMode::Overwrite, o.store.write_limits())
            {
                Ok(w) => writes.push((w, p.expected.clone())),
                Err(e) => {
                    put_back(&planned, &written, &done, targets).await;
                    return failed(project, &planned, p, e);
                }
            }
        }
        match o.store.write_checked_batch(writes).await {
            Ok(w) => {
                for (n, v) in mine.iter().zip(w) {
                    written[*n] = Some(v);
                    done.push(*n);
                }
            }
            Err(e) => {
                put_back(&planned, &written, &done, targets).await;
                let p = conflicting(&planned, &e).unwrap_or(&planned[mine[0]]);
                return failed(project, &planned, p, e);
            }
        }
    }
    // 2. The store with transactions (the project's; the global memory is a directory).
    let in_tx: Vec<usize> = (0..planned.len())
        .filter(|n| atomic(&planned[*n]).is_some())
        .collect();
    if let Some(batches) = in_tx.first().and_then(|n| atomic(&planned[*n])) {
        let mut writes = Vec::with_capacity(in_tx.len());
        for n in &in_tx {
            let p = &planned[*n];
            let limits = targets
                .of(p.entry.global)
                .map(|o| o.store.write_limits())
                .unwrap_or_default();
            match CheckedWrite::check(&p.rel, &p.doc, WriteMode::Overwrite, limits) {
                Ok(w) => writes.push((w, p.expected.clone())),
                Err(e) => {
                    put_back(&planned, &written, &done, targets).await;
                    return failed(project, &planned, p, e);
                }
            }
        }
        let before = written.clone();
        let answer = |w: &[VersionedWrite]| {
            let mut all = before.clone();
            for (n, v) in in_tx.iter().zip(w) {
                all[*n] = Some(v.clone());
            }
            let all: Vec<VersionedWrite> = all.into_iter().flatten().collect();
            answer_of(projects, project, &planned, &all, key)
        };
        match batches.write_batch(writes, key, &answer).await {
            Ok(Batched::Written(w)) => {
                for (n, v) in in_tx.iter().zip(w) {
                    written[*n] = Some(v);
                }
            }
            Ok(Batched::Replayed(first)) => {
                put_back(&planned, &written, &done, targets).await;
                return match key {
                    Some(k) => Ok(replayed(first, k)),
                    None => Ok(first),
                };
            }
            Ok(Batched::KeyReused) => {
                put_back(&planned, &written, &done, targets).await;
                return match key {
                    Some(k) => Err(key_reused(k)),
                    None => Err(Refusal::new("idempotency key reused")),
                };
            }
            Err(e) => {
                put_back(&planned, &written, &done, targets).await;
                let p = conflicting(&planned, &e).unwrap_or(&planned[in_tx[0]]);
                return failed(project, &planned, p, e);
            }
        }
    }
    if let Some(s) = projects.summariser() {
        for (p, w) in planned.iter().zip(&written) {
            if let (Some(o), Some(w)) = (targets.of(p.entry.global), w) {
                s.enqueue(&o.store, &w.report.rel_path);
            }
        }
    }
    let all: Vec<VersionedWrite> = written.into_iter().flatten().collect();
    Ok(answer_of(projects, project, &planned, &all, key))
}

/// The planned entry a conflict names.
fn conflicting<'p, 'e>(planned: &'p [Planned<'e>], e: &MemoryError) -> Option<&'p Planned<'e>> {
    match e {
        MemoryError::VersionConflict { path, .. } => planned.iter().find(|p| &p.rel == path),
        _ => None,
    }
}

/// A write failed after the batch was checked (a concurrent change, a failing disk or
/// database): the batch is refused with that entry's reason, or reported unavailable.
fn failed(
    project: &Project,
    planned: &[Planned<'_>],
    p: &Planned<'_>,
    e: MemoryError,
) -> Result<Value, Refusal> {
    if matches!(e, MemoryError::VersionConflict { .. }) || is_refusal(&e) {
        let (code, reason) = refusal_reason(&e);
        // Every entry passed the checks, so the planned ones are the batch, in order.
        let entries: Vec<SaveEntry> = planned.iter().map(|p| p.entry.clone()).collect();
        let r = batch_refusal(&entries, &[(p.index, code, reason)], "failed");
        return Err(r);
    }
    let mut v = unavailable(project, &e);
    if let Value::Object(map) = &mut v {
        map.insert("written".into(), json!(0));
        map.insert(
            "note".into(),
            json!("nothing of this batch was written (entries already written were put back)"),
        );
    }
    Ok(v)
}

/// Put the entries written so far (`done`, positions in `planned`) back as they were before
/// the batch: the previous text restored, or the new memory deleted. Each only if it is still
/// what this batch wrote.
async fn put_back(
    planned: &[Planned<'_>],
    written: &[Option<VersionedWrite>],
    done: &[usize],
    targets: &Targets,
) {
    for n in done.iter().rev() {
        let (p, Some(w)) = (&planned[*n], &written[*n]) else {
            continue;
        };
        let Some(o) = targets.of(p.entry.global) else {
            continue;
        };
        let store: &dyn MemoryStore = o.store.as_ref();
        let ours = ExpectedVersion::Is(w.version.clone());
        let restored = match &p.previous {
            Some(text) => store.write_raw_if(&p.rel, text, &ours).await.map(|_| ()),
            None => store.delete(&p.rel).await,
        };
        match restored {
            Ok(()) => tracing::info!(rel = %p.rel, "batch entry put back"),
            Err(e) => tracing::warn!(rel = %p.rel, error = %e, "batch entry could not be put back"),
        }
    }
}
