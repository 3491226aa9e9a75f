//! The checks of the conformance suite, one function each. Every check gets an empty store and
//! answers `Err` with what the store did wrong.

use crate::changes::{ChangeCursor, Changes};
use crate::frontmatter::canonical_memory_text;
use crate::memory_store::{ExpectedVersion, MemoryStore, content_version};
use crate::types::{MemoryDoc, MemoryError, MemoryFile, MemoryType, WriteMode};
use std::sync::Arc;

/// How many writers the concurrent-writers check ([`Check::ConcurrentWriters`](super::Check::ConcurrentWriters)) releases at once.
pub const CONCURRENT_WRITERS: usize = 8;

pub(super) type Store = Arc<dyn MemoryStore>;
pub(super) type Outcome = Result<(), String>;

/// A project memory.
pub(super) fn doc(name: &str, description: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, description, MemoryType::Project, body)
}

/// A store error, said with what the check was doing.
pub(super) fn during(what: impl std::fmt::Display) -> impl FnOnce(MemoryError) -> String {
    move |e| format!("{what}: the store answered `{e}`")
}

/// A body as a store gives it back: a trailing line break may be added or dropped.
pub(super) fn same_body(stored: &str, written: &str) -> bool {
    stored.trim_end_matches(['\n', '\r']) == written.trim_end_matches(['\n', '\r'])
}

pub(super) async fn read(store: &Store, rel: &str) -> Result<MemoryFile, String> {
    store
        .read(rel)
        .await
        .map_err(during(format!("reading {rel}")))
}

/// `Ok(true)` when `rel` holds a memory, `Ok(false)` when the store says there is none.
pub(super) async fn exists(store: &Store, rel: &str) -> Result<bool, String> {
    match store.read(rel).await {
        Ok(_) => Ok(true),
        Err(MemoryError::NotFound(_)) => Ok(false),
        Err(e) => Err(format!("reading {rel}: the store answered `{e}`")),
    }
}

pub(super) async fn scanned_paths(store: &Store) -> Result<Vec<String>, String> {
    Ok(store
        .scan()
        .await
        .map_err(during("scanning"))?
        .into_iter()
        .map(|h| h.rel_path)
        .collect())
}

/// The memory's fields as read back equal `written`'s.
pub(super) fn same_memory(file: &MemoryFile, rel: &str, written: &MemoryDoc) -> Outcome {
    let h = &file.header;
    ensure!(
        h.rel_path == rel,
        "{rel} was read back with the path {:?}",
        h.rel_path
    );
    ensure!(
        h.name.as_deref() == Some(written.name.as_str()),
        "{rel}: the title {:?} was read back as {:?}",
        written.name,
        h.name
    );
    ensure!(
        h.description.as_deref() == Some(written.description.as_str()),
        "{rel}: the description {:?} was read back as {:?}",
        written.description,
        h.description
    );
    ensure!(
        h.memory_type == written.memory_type,
        "{rel}: the type {:?} was read back as {:?}",
        written.memory_type,
        h.memory_type
    );
    ensure!(
        same_body(&file.body, &written.body),
        "{rel}: the body {:?} was read back as {:?}",
        written.body,
        file.body
    );
    Ok(())
}

/// Write `d` at `rel` (overwriting) and read it back as written.
pub(super) async fn write_read(store: &Store, rel: &str, d: &MemoryDoc) -> Outcome {
    store
        .write(rel, d, WriteMode::Overwrite)
        .await
        .map_err(during(format!("writing {rel:?}")))?;
    same_memory(&read(store, rel).await?, rel, d)
}

/// A write the rules refuse: `Err` unless the store refused it with an error `accepts` takes.
async fn refused_write(
    store: &Store,
    rel: &str,
    d: &MemoryDoc,
    what: &str,
    accepts: fn(&MemoryError) -> bool,
) -> Outcome {
    match store.write(rel, d, WriteMode::Overwrite).await {
        Ok(_) => Err(format!("{what}: the write to {rel:?} was accepted")),
        Err(e) if accepts(&e) => Ok(()),
        Err(e) => Err(format!("{what}: the write to {rel:?} failed with `{e}`")),
    }
}

fn invalid_path(e: &MemoryError) -> bool {
    matches!(
        e,
        MemoryError::InvalidName { .. } | MemoryError::OutsideMemoryDir { .. }
    )
}

fn sensitive(e: &MemoryError) -> bool {
    matches!(e, MemoryError::SensitiveData { .. })
}

fn too_large(e: &MemoryError) -> bool {
    matches!(e, MemoryError::TooLarge { .. })
}

/// A path no write, read or delete may use.
async fn refused_path(store: &Store, rel: &str) -> Outcome {
    refused_write(
        store,
        rel,
        &doc("Refused", "a path the rules refuse", "nothing"),
        "an invalid path",
        invalid_path,
    )
    .await?;
    if let Ok(file) = store.read(rel).await {
        return Err(format!(
            "reading the invalid path {rel:?} gave a memory at {:?}",
            file.header.rel_path
        ));
    }
    ensure!(
        store.delete(rel).await.is_err(),
        "deleting the invalid path {rel:?} succeeded"
    );
    Ok(())
}

/// The conflict `result` should be: `Err` unless it is a version conflict naming `current`.
pub(super) fn conflict<T>(result: Result<T, MemoryError>, what: &str, current: &str) -> Outcome {
    match result {
        Ok(_) => Err(format!("{what}: the write was accepted")),
        Err(MemoryError::VersionConflict { current: c, .. }) => {
            ensure!(
                c.eq_ignore_ascii_case(current),
                "{what}: the conflict names the current version {c}, not {current}"
            );
            Ok(())
        }
        Err(e) => Err(format!(
            "{what}: expected a version conflict, the store answered `{e}`"
        )),
    }
}

/// Write and read back: fields, version, `created`, overwrite, append, scan and delete.
pub(crate) async fn round_trip(store: Store) -> Outcome {
    let first = doc(
        "Deploy days",
        "when the team deploys",
        "Deploys happen on Tuesdays.\nNever on Fridays.\n",
    );
    let w = store
        .write_if(
            "deploy.md",
            &first,
            WriteMode::Overwrite,
            &ExpectedVersion::Any,
        )
        .await
        .map_err(during("writing deploy.md"))?;
    ensure!(
        w.report.created,
        "the first write of deploy.md did not report `created`"
    );
    ensure!(
        w.report.rel_path == "deploy.md",
        "writing deploy.md reported the path {:?}",
        w.report.rel_path
    );
    let file = read(&store, "deploy.md").await?;
    same_memory(&file, "deploy.md", &first)?;
    ensure!(
        w.version == content_version(&file.raw),
        "the write reported version {} but the text read back has version {}",
        w.version,
        content_version(&file.raw)
    );

    let second = doc(
        "Deploy days",
        "when the team ships",
        "Deploys moved to Wednesdays.",
    );
    let again = store
        .write("deploy.md", &second, WriteMode::Overwrite)
        .await
        .map_err(during("overwriting deploy.md"))?;
    ensure!(!again.created, "overwriting deploy.md reported `created`");
    same_memory(&read(&store, "deploy.md").await?, "deploy.md", &second)?;

    let more = doc(
        "Deploy days",
        "when the team ships",
        "Staging deploys on Mondays.",
    );
    store
        .write("deploy.md", &more, WriteMode::Append)
        .await
        .map_err(during("appending to deploy.md"))?;
    let appended = read(&store, "deploy.md").await?.body;
    let (old, new) = (
        appended.find("Deploys moved to Wednesdays."),
        appended.find("Staging deploys on Mondays."),
    );
    ensure!(
        matches!((old, new), (Some(o), Some(n)) if o < n),
        "an append must keep the old body and add the new one after it; the body is {appended:?}"
    );

    let listed = scanned_paths(&store).await?;
    ensure!(
        listed.iter().filter(|p| *p == "deploy.md").count() == 1,
        "scan must list deploy.md once; it listed {listed:?}"
    );
    ensure!(
        !exists(&store, "missing.md").await?,
        "a memory never written was read"
    );
    store
        .delete("deploy.md")
        .await
        .map_err(during("deleting deploy.md"))?;
    ensure!(
        !exists(&store, "deploy.md").await?,
        "deploy.md was still read after its delete"
    );
    let listed = scanned_paths(&store).await?;
    ensure!(
        !listed.iter().any(|p| p == "deploy.md"),
        "scan still lists deploy.md after its delete: {listed:?}"
    );
    Ok(())
}

/// Nested paths are memories; malformed ones are refused everywhere and leave nothing.
pub(crate) async fn names_and_paths(store: Store) -> Outcome {
    let valid = ["topics/deploy.md", "a/b/c/deep.md", "notes.md.md"];
    for (i, rel) in valid.iter().enumerate() {
        let d = doc(&format!("Valid {i}"), "a nested path", &format!("body {i}"));
        write_read(&store, rel, &d).await?;
    }
    for rel in [
        "../escape.md",
        "topics/../../escape.md",
        "topics/../deploy.md",
        "/etc/escape.md",
        "notes.txt",
        "notes",
        ".hidden.md",
        "topics/.hidden.md",
        "a//escape.md",
        "a\\escape.md",
        "",
        "topics/",
        ".md",
    ] {
        refused_path(&store, rel).await?;
    }
    let mut listed = scanned_paths(&store).await?;
    listed.sort();
    let mut expected: Vec<String> = valid.iter().map(|s| (*s).to_owned()).collect();
    expected.sort();
    ensure!(
        listed == expected,
        "after refused writes the store must hold only {expected:?}; scan lists {listed:?}"
    );
    Ok(())
}

/// `MEMORY.md` is the index: never a memory; one entry per memory, kept up to date.
pub(crate) async fn memory_index(store: Store) -> Outcome {
    for rel in ["MEMORY.md", "team/MEMORY.md", "topics/MEMORY.md"] {
        refused_path(&store, rel).await?;
    }
    let deploy = doc("Deploy days", "when we deploy", "Tuesdays.");
    store
        .write("deploy.md", &deploy, WriteMode::Overwrite)
        .await
        .map_err(during("writing deploy.md"))?;
    let entry_of = |entries: &[crate::types::IndexEntry], file: &str| {
        entries
            .iter()
            .filter(|e| e.file == file)
            .cloned()
            .collect::<Vec<_>>()
    };
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    let found = entry_of(&entries, "deploy.md");
    ensure!(
        found.len() == 1,
        "the index must have one entry for deploy.md; it has {entries:?}"
    );
    ensure!(
        found[0].title == "Deploy days" && found[0].hook == "when we deploy",
        "the index entry of deploy.md must carry its title and description; it is {:?}",
        found[0]
    );
    let index = store
        .load_index()
        .await
        .map_err(during("loading the index"))?;
    ensure!(
        index.content.contains("(deploy.md)") && index.content.contains("Deploy days"),
        "the loaded index must link deploy.md with its title; it is {:?}",
        index.content
    );

    let shipped = doc("Deploy days", "when we ship", "Wednesdays.");
    store
        .write("deploy.md", &shipped, WriteMode::Overwrite)
        .await
        .map_err(during("rewriting deploy.md"))?;
    let testing = doc(
        "Testing",
        "how we test",
        "Integration tests hit a real database.",
    );
    store
        .write("testing.md", &testing, WriteMode::Overwrite)
        .await
        .map_err(during("writing testing.md"))?;
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    let found = entry_of(&entries, "deploy.md");
    ensure!(
        found.len() == 1 && found[0].hook == "when we ship",
        "a rewrite must replace the index entry (one entry, the new description); the index has {entries:?}"
    );
    ensure!(
        entry_of(&entries, "testing.md").len() == 1,
        "the index must have one entry for testing.md; it has {entries:?}"
    );
    let listed = scanned_paths(&store).await?;
    ensure!(
        !listed
            .iter()
            .any(|p| p.rsplit('/').next() == Some("MEMORY.md")),
        "scan must never list an index file; it listed {listed:?}"
    );

    store
        .delete("deploy.md")
        .await
        .map_err(during("deleting deploy.md"))?;
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    ensure!(
        entry_of(&entries, "deploy.md").is_empty(),
        "a delete must remove the index entry; the index has {entries:?}"
    );
    let index = store
        .load_index()
        .await
        .map_err(during("loading the index"))?;
    ensure!(
        !index.content.contains("(deploy.md)"),
        "the loaded index still links the deleted deploy.md: {:?}",
        index.content
    );

    let mut cleared = store.clear().await.map_err(during("clearing the store"))?;
    cleared.sort();
    ensure!(
        cleared == ["testing.md"],
        "clear must return the memories it deleted (testing.md); it returned {cleared:?}"
    );
    let listed = scanned_paths(&store).await?;
    ensure!(listed.is_empty(), "scan lists {listed:?} after clear");
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    ensure!(
        entries.is_empty(),
        "the index holds {entries:?} after clear"
    );
    Ok(())
}

/// The largest text this check writes whole: a store that declares more is not exercised.
const LARGEST_TESTED_LIMIT: usize = 64 * 1024 * 1024;

/// A memory of exactly the store's limit is stored whole; one byte more is refused.
pub(crate) async fn size_limit(store: Store) -> Outcome {
    let limit = store.write_limits().max_text_bytes;
    ensure!(
        limit <= LARGEST_TESTED_LIMIT,
        "the store declares a {limit}-byte limit; the suite checks limits up to {LARGEST_TESTED_LIMIT} bytes"
    );
    let fitted = |extra: usize| {
        // The frontmatter and framing around a one-byte body.
        let overhead = doc("Big", "a memory at the size limit", "a").render().len() - 1;
        let body_len = (limit + extra).saturating_sub(overhead);
        let d = doc("Big", "a memory at the size limit", &"a".repeat(body_len));
        (d.render().len() == limit + extra).then_some(d)
    };
    let (Some(exact), Some(over)) = (fitted(0), fitted(1)) else {
        return Err(format!(
            "the store's limit ({limit} bytes) is smaller than a memory's frontmatter"
        ));
    };
    let small = doc("Big", "a memory at the size limit", "small");
    store
        .write("big.md", &small, WriteMode::Overwrite)
        .await
        .map_err(during("writing big.md"))?;
    refused_write(
        &store,
        "big.md",
        &over,
        "a memory one byte over the limit",
        too_large,
    )
    .await?;
    same_memory(&read(&store, "big.md").await?, "big.md", &small)
        .map_err(|e| format!("a refused oversized write changed the memory: {e}"))?;

    let w = store
        .write_if(
            "big.md",
            &exact,
            WriteMode::Overwrite,
            &ExpectedVersion::Any,
        )
        .await
        .map_err(during(format!("writing a memory of exactly {limit} bytes")))?;
    let file = read(&store, "big.md").await?;
    ensure!(
        file.raw.len() == limit && same_body(&file.body, &exact.body),
        "a memory of exactly {limit} bytes was read back with {} bytes of text and a {}-byte body \
         (written: {} bytes of body)",
        file.raw.len(),
        file.body.len(),
        exact.body.len()
    );
    ensure!(
        content_version(&file.raw) == w.version,
        "the memory at the limit was read back with another version than the write reported"
    );
    let raw_over = format!("{}a", exact.render());
    match store
        .write_raw_if("raw_big.md", &raw_over, &ExpectedVersion::Any)
        .await
    {
        Err(MemoryError::TooLarge { .. }) => {}
        Ok(_) => return Err("a raw memory file one byte over the limit was accepted".into()),
        Err(e) => {
            return Err(format!(
                "a raw memory file one byte over the limit failed with `{e}`"
            ));
        }
    }
    ensure!(
        !exists(&store, "raw_big.md").await?,
        "a refused raw write left raw_big.md behind"
    );
    Ok(())
}

/// Credentials anywhere in a write are refused, unechoed, and change nothing.
pub(crate) async fn secrets(store: Store) -> Outcome {
    let aws = "AKIAIOSFODNN7EXAMPLE";
    let github = "ghp_0123456789abcdefghijABCDEFGHIJ012345";
    let clean = doc(
        "Deploy",
        "how we deploy",
        "The deploy key lives in the vault.",
    );
    let before = store
        .write_if(
            "deploy.md",
            &clean,
            WriteMode::Overwrite,
            &ExpectedVersion::Any,
        )
        .await
        .map_err(during("writing deploy.md"))?
        .version;
    let attempts = [
        (
            "the body",
            WriteMode::Overwrite,
            doc("Deploy", "how we deploy", &format!("use {aws} to deploy")),
        ),
        (
            "the title",
            WriteMode::Overwrite,
            doc(&format!("key {aws}"), "how we deploy", "body"),
        ),
        (
            "the description",
            WriteMode::Overwrite,
            doc("Deploy", &format!("token {github}"), "body"),
        ),
        (
            "an appended body",
            WriteMode::Append,
            doc("Deploy", "how we deploy", &format!("token {github}")),
        ),
    ];
    for (field, mode, d) in &attempts {
        let mode = *mode;
        for rel in ["deploy.md", "leak.md"] {
            match store.write(rel, d, mode).await {
                Err(MemoryError::SensitiveData { pattern }) => {
                    let message = MemoryError::SensitiveData { pattern }.to_string();
                    ensure!(
                        !message.contains(aws) && !message.contains(github),
                        "the refusal of a credential in {field} echoes it: {message}"
                    );
                }
                Ok(_) => return Err(format!("a credential in {field} of {rel} was stored")),
                Err(e) => {
                    return Err(format!(
                        "a credential in {field} of {rel} failed with `{e}`, not as sensitive data"
                    ));
                }
            }
        }
    }
    let raw = format!(
        "---\nname: Deploy\ndescription: how we deploy\ntype: project\ntoken: {github}\n---\n\nbody\n"
    );
    for rel in ["deploy.md", "leak.md"] {
        match store.write_raw_if(rel, &raw, &ExpectedVersion::Any).await {
            Err(e) if sensitive(&e) => {}
            Ok(_) => {
                return Err(format!(
                    "a credential in an unknown frontmatter key of a raw {rel} was stored"
                ));
            }
            Err(e) => return Err(format!("a raw file with a credential failed with `{e}`")),
        }
    }
    let after = read(&store, "deploy.md").await?;
    ensure!(
        content_version(&after.raw) == before,
        "refused writes with credentials changed deploy.md: {:?}",
        after.raw
    );
    ensure!(
        !exists(&store, "leak.md").await?,
        "a refused write with a credential left leak.md behind"
    );
    Ok(())
}

/// `user` memories stay out of `team/`; other team memories are listed and indexed there.
pub(crate) async fn team_rule(store: Store) -> Outcome {
    let me = MemoryDoc::new(
        "My role",
        "who the user is",
        MemoryType::User,
        "Backend engineer.",
    );
    refused_write(
        &store,
        "team/role.md",
        &me,
        "a user memory in team memory",
        |e| matches!(e, MemoryError::InvalidName { .. }),
    )
    .await?;
    let raw =
        "---\nname: My role\ndescription: who the user is\ntype: user\n---\n\nBackend engineer.\n";
    if store
        .write_raw_if("team/role.md", raw, &ExpectedVersion::Any)
        .await
        .is_ok()
    {
        return Err("a raw user memory was written into team memory".into());
    }
    ensure!(
        !exists(&store, "team/role.md").await?,
        "a refused user memory is in team memory"
    );
    write_read(&store, "role.md", &me).await?;

    let shared = doc(
        "Release train",
        "when the team releases",
        "Every other Thursday.",
    );
    write_read(&store, "team/release.md", &shared).await?;
    let listed = scanned_paths(&store).await?;
    ensure!(
        listed.iter().filter(|p| *p == "team/release.md").count() == 1,
        "scan must list team/release.md once; it listed {listed:?}"
    );
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    ensure!(
        entries
            .iter()
            .filter(|e| e.file == "team/release.md")
            .count()
            == 1,
        "the index must list team/release.md under its team path once; it has {entries:?}"
    );
    // Loaded once at session start: in the team index when the store keeps one, else in the
    // private index; a private memory never in the team index.
    let private = store
        .load_index()
        .await
        .map_err(during("loading the private index"))?
        .content;
    let team = store
        .load_scope_index(crate::team::MemoryScope::Team)
        .await
        .map_err(during("loading the team index"))?
        .content;
    let (in_team, in_private) = (
        team.contains("](release.md)"),
        private.contains("](team/release.md)"),
    );
    ensure!(
        in_team != in_private,
        "a team memory is loaded exactly once: in the team index (linked relative to team/) \
         or, for a store without one, in the private index; team/release.md is in {}\
         (private index {private:?}, team index {team:?})",
        if in_team { "both" } else { "neither" }
    );
    ensure!(
        private.contains("](role.md)") && !team.contains("](role.md)"),
        "a private memory belongs in the private index only (private index {private:?}, team \
         index {team:?})"
    );
    Ok(())
}

/// Create-only, exact-version and any-version writes; conflicts name the current version.
pub(crate) async fn versions(store: Store) -> Outcome {
    let (d1, d2, d3) = (
        doc("Versions", "a versioned memory", "first"),
        doc("Versions", "a versioned memory", "second"),
        doc("Versions", "a versioned memory", "third"),
    );
    let write_if = |d: &MemoryDoc, expected: ExpectedVersion| {
        let (store, d) = (store.clone(), d.clone());
        async move {
            store
                .write_if("v.md", &d, WriteMode::Overwrite, &expected)
                .await
        }
    };
    let version_read = |rel: &'static str| {
        let store = store.clone();
        async move { Ok::<_, String>(content_version(&read(&store, rel).await?.raw)) }
    };

    let v1 = write_if(&d1, ExpectedVersion::Absent)
        .await
        .map_err(during("creating v.md (expecting no memory)"))?
        .version;
    ensure!(
        v1 == version_read("v.md").await?,
        "the version a write reports must be content_version of the text read back"
    );
    conflict(
        write_if(&d2, ExpectedVersion::Absent).await,
        "creating v.md again (expecting no memory)",
        &v1,
    )?;
    same_memory(&read(&store, "v.md").await?, "v.md", &d1)?;

    let v2 = write_if(&d2, ExpectedVersion::Is(v1.clone()))
        .await
        .map_err(during("writing v.md at its current version"))?
        .version;
    ensure!(v2 != v1, "a change of content kept the version {v1}");
    ensure!(
        v2 == version_read("v.md").await?,
        "the version a write reports must be content_version of the text read back"
    );
    conflict(
        write_if(&d3, ExpectedVersion::Is(v1.clone())).await,
        "writing v.md at a stale version",
        &v2,
    )?;
    same_memory(&read(&store, "v.md").await?, "v.md", &d2)
        .map_err(|e| format!("a conflicting write changed the memory: {e}"))?;
    let same = write_if(&d2, ExpectedVersion::Is(v2.clone()))
        .await
        .map_err(during("rewriting v.md with the same content"))?;
    ensure!(
        same.version == v2,
        "rewriting the same content changed the version from {v2} to {}",
        same.version
    );
    conflict(
        store
            .write_if(
                "absent.md",
                &d1,
                WriteMode::Overwrite,
                &ExpectedVersion::Is(v2.clone()),
            )
            .await,
        "writing a memory that does not exist at a version",
        "none",
    )?;
    ensure!(
        !exists(&store, "absent.md").await?,
        "a conflicting write created absent.md"
    );
    let v3 = write_if(&d3, ExpectedVersion::Any)
        .await
        .map_err(during("writing v.md at any version"))?
        .version;

    let raw = "---\nname: Raw\ndescription: a raw memory file\ntype: project\nowner: platform # who keeps it\n---\n\n# Raw\n\nKept byte for byte.\n";
    let rv = store
        .write_raw_if("raw.md", raw, &ExpectedVersion::Absent)
        .await
        .map_err(during("writing raw.md as a raw file"))?
        .version;
    let file = read(&store, "raw.md").await?;
    let canonical =
        canonical_memory_text(raw, "raw").map_err(|e| format!("the suite's raw file: {e}"))?;
    ensure!(
        file.raw == raw || file.raw == canonical,
        "a raw memory file must be stored byte for byte, or as its canonical text (the same \
         fields and unknown keys, formatting normalised); it was read back as {:?}",
        file.raw
    );
    ensure!(
        rv == content_version(&file.raw),
        "a raw write must report the content_version of the text read back"
    );
    conflict(
        store
            .write_raw_if("raw.md", raw, &ExpectedVersion::Is(v1.clone()))
            .await,
        "a raw write at a stale version",
        &rv,
    )?;

    store
        .delete("v.md")
        .await
        .map_err(during("deleting v.md"))?;
    conflict(
        write_if(&d1, ExpectedVersion::Is(v3)).await,
        "writing a deleted memory at its last version",
        "none",
    )?;
    write_if(&d1, ExpectedVersion::Absent)
        .await
        .map_err(during("creating v.md again after its delete"))?;
    Ok(())
}

/// Writers released together: one winner per version, one creator per memory, no lost writes.
pub(crate) async fn concurrent_writers(store: Store) -> Outcome {
    let n = CONCURRENT_WRITERS;
    let v0 = store
        .write_if(
            "race.md",
            &doc("Race", "a contended memory", "start"),
            WriteMode::Overwrite,
            &ExpectedVersion::Any,
        )
        .await
        .map_err(during("writing race.md"))?
        .version;
    for (rel, expected) in [
        ("race.md", ExpectedVersion::Is(v0)),
        ("fresh.md", ExpectedVersion::Absent),
    ] {
        let barrier = Arc::new(tokio::sync::Barrier::new(n));
        let tasks: Vec<_> = (0..n)
            .map(|i| {
                let (store, barrier, expected) = (store.clone(), barrier.clone(), expected.clone());
                let d = doc("Race", "a contended memory", &format!("writer {i}"));
                tokio::spawn(async move {
                    barrier.wait().await;
                    let result = store
                        .write_if(rel, &d, WriteMode::Overwrite, &expected)
                        .await;
                    (i, result)
                })
            })
            .collect();
        let mut winners = Vec::new();
        for task in tasks {
            let (i, result) = task
                .await
                .map_err(|e| format!("a writer of {rel} did not finish: {e}"))?;
            match result {
                Ok(w) => winners.push((i, w.version)),
                Err(MemoryError::VersionConflict { .. }) => {}
                Err(e) => return Err(format!("writer {i} of {rel} failed with `{e}`")),
            }
        }
        let [(winner, version)] = winners.as_slice() else {
            return Err(format!(
                "{n} writers expecting {expected:?} of {rel}: exactly one must win, {} did ({:?})",
                winners.len(),
                winners.iter().map(|w| w.0).collect::<Vec<_>>()
            ));
        };
        let file = read(&store, rel).await?;
        ensure!(
            same_body(&file.body, &format!("writer {winner}")),
            "writer {winner} won {rel} but the memory holds {:?}",
            file.body
        );
        ensure!(
            content_version(&file.raw) == *version,
            "the winner's version of {rel} is not the version read back"
        );
    }

    // The same race driven from one task: every writer runs until it waits, then the next one
    // runs. A backend that awaits anything between its version check and its write lets every
    // writer pass the check before the first writes; one that makes them one step does not.
    let v1 = store
        .write_if(
            "interleaved.md",
            &doc("Чередование", "écrivains entrelacés", "начало"),
            WriteMode::Overwrite,
            &ExpectedVersion::Any,
        )
        .await
        .map_err(during("writing interleaved.md"))?
        .version;
    for (rel, expected) in [
        ("interleaved.md", ExpectedVersion::Is(v1)),
        ("新/interleaved.md", ExpectedVersion::Absent),
    ] {
        let writers: Vec<_> = (0..n)
            .map(|i| {
                let (store, expected) = (store.clone(), expected.clone());
                let d = doc("Чередование", "écrivains entrelacés", &format!("作者 {i}"));
                Box::pin(async move {
                    store
                        .write_if(rel, &d, WriteMode::Overwrite, &expected)
                        .await
                }) as super::interleave::Pinned<'_, _>
            })
            .collect();
        let mut winners = Vec::new();
        for (i, result) in super::interleave::join_all(writers)
            .await
            .into_iter()
            .enumerate()
        {
            match result {
                Ok(_) => winners.push(i),
                Err(MemoryError::VersionConflict { .. }) => {}
                Err(e) => return Err(format!("interleaved writer {i} of {rel} failed with `{e}`")),
            }
        }
        ensure!(
            winners.len() == 1,
            "{n} writers of {rel} expecting {expected:?}, interleaved in one task (each runs \
             until it awaits): exactly one must win, {} did ({winners:?}): the version check and \
             the write are not one step",
            winners.len()
        );
        let file = read(&store, rel).await?;
        ensure!(
            same_body(&file.body, &format!("作者 {}", winners[0])),
            "interleaved writer {} won {rel} but the memory holds {:?}",
            winners[0],
            file.body
        );
    }

    let barrier = Arc::new(tokio::sync::Barrier::new(n));
    let tasks: Vec<_> = (0..n)
        .map(|i| {
            let (store, barrier) = (store.clone(), barrier.clone());
            tokio::spawn(async move {
                barrier.wait().await;
                let d = doc(
                    &format!("Writer {i}"),
                    "one of many",
                    &format!("writer {i}"),
                );
                store
                    .write(&format!("many/w{i}.md"), &d, WriteMode::Overwrite)
                    .await
                    .map(|_| ())
                    .map_err(during(format!("writer {i} of many/w{i}.md")))
            })
        })
        .collect();
    for task in tasks {
        task.await
            .map_err(|e| format!("a writer did not finish: {e}"))??;
    }
    let listed = scanned_paths(&store).await?;
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    for i in 0..n {
        let rel = format!("many/w{i}.md");
        ensure!(
            listed.contains(&rel),
            "{n} concurrent writes of different memories: scan lacks {rel} ({listed:?})"
        );
        ensure!(
            entries.iter().filter(|e| e.file == rel).count() == 1,
            "{n} concurrent writes of different memories: the index must list {rel} once ({entries:?})"
        );
    }
    Ok(())
}

/// The change feed reports writes and deletes since a cursor, or declares it has none.
pub(crate) async fn change_feed(store: Store) -> Outcome {
    let foreign = ChangeCursor::new("conformance-suite:a cursor no store issued");
    let start = match store
        .changes(None)
        .await
        .map_err(during("asking for changes"))?
    {
        Changes::Rescan { cursor } => cursor,
        other => {
            return Err(format!(
                "without a cursor the feed must ask for a rescan; it answered {other:?}"
            ));
        }
    };
    let written = doc("Feed", "a memory the feed reports", "first");
    let Some(start) = start else {
        // Declared absence: every question is answered with a rescan and no cursor.
        store
            .write("feed.md", &written, WriteMode::Overwrite)
            .await
            .map_err(during("writing feed.md"))?;
        for since in [None, Some(&foreign)] {
            let answer = store
                .changes(since)
                .await
                .map_err(during("asking for changes"))?;
            ensure!(
                answer == Changes::Rescan { cursor: None },
                "a store without a feed (it gave no cursor) must always ask for a rescan; \
                 it answered {answer:?}"
            );
        }
        return Ok(());
    };

    store
        .write("feed.md", &written, WriteMode::Overwrite)
        .await
        .map_err(during("writing feed.md"))?;
    let after_write = match store
        .changes(Some(&start))
        .await
        .map_err(during("asking for changes since the write"))?
    {
        Changes::Unchanged => {
            return Err("a memory written since the cursor was answered `Unchanged`".into());
        }
        Changes::Changed {
            cursor,
            written: w,
            files,
            ..
        } => {
            ensure!(
                w.iter()
                    .any(|h| h.rel_path == "feed.md" && h.name.as_deref() == Some("Feed")),
                "the changes since the cursor lack the written feed.md (with its header): {w:?}"
            );
            // Texts carried along are what a read returns, each for a header it lists.
            for f in &files {
                ensure!(
                    w.contains(&f.header),
                    "the changes carry the text of {} but list it with another header (or not \
                     at all): {w:?}",
                    f.header.rel_path
                );
                let read = store
                    .read(&f.header.rel_path)
                    .await
                    .map_err(during("reading a memory the feed carried"))?;
                ensure!(
                    read == *f,
                    "the text the changes carry for {} is not what a read returns",
                    f.header.rel_path
                );
            }
            Some(cursor)
        }
        Changes::Rescan { cursor } => cursor,
    };
    if let Some(after_write) = after_write {
        store
            .delete("feed.md")
            .await
            .map_err(during("deleting feed.md"))?;
        match store
            .changes(Some(&after_write))
            .await
            .map_err(during("asking for changes since the delete"))?
        {
            Changes::Unchanged => {
                return Err("a memory deleted since the cursor was answered `Unchanged`".into());
            }
            Changes::Changed {
                removed, written, ..
            } => ensure!(
                removed.iter().any(|p| p.as_str() == "feed.md")
                    && !written.iter().any(|h| h.rel_path == "feed.md"),
                "the changes since the cursor must list the deleted feed.md as removed \
                 (removed {removed:?}, written {written:?})"
            ),
            Changes::Rescan { .. } => {}
        }
    }
    match store
        .changes(Some(&foreign))
        .await
        .map_err(during("asking for changes since a foreign cursor"))?
    {
        Changes::Rescan { .. } => Ok(()),
        other => Err(format!(
            "a cursor the store never issued must get a rescan; it answered {other:?}"
        )),
    }
}

/// Text in many scripts, paths included, is kept exactly.
pub(crate) async fn non_ascii(store: Store) -> Outcome {
    let memories = [
        (
            "决定/发布流程.md",
            "发布流程",
            "每周二发布，周五不发布",
            "部署前先跑冒烟测试。\n回滚：`git revert`。",
        ),
        (
            "日本語/メモ.md",
            "デプロイ手順",
            "本番デプロイの前に確認すること",
            "ステージングで確認してから本番へ。",
        ),
        (
            "ملاحظات.md",
            "ملاحظات النشر",
            "متى ننشر التحديثات",
            "ننشر يوم الثلاثاء، وليس يوم الجمعة.",
        ),
        (
            "команда/релиз.md",
            "Релиз",
            "как мы выпускаем версии",
            "Сначала тесты, потом релиз.",
        ),
        (
            "परियोजना.md",
            "परियोजना की समय-सीमा",
            "कब तक पूरा करना है",
            "शुक्रवार तक पूरा करना है।",
        ),
        (
            "bidi.md",
            "\u{202e}txt.exe",
            "a right-to-left override \u{202e}in a title",
            "\u{200b}zero width\u{feff} and \u{200f}marks",
        ),
        (
            "🚀-launch.md",
            "Launch 🚀",
            "launch day 🎉 for the 👩‍👩‍👧 team",
            "Ship it 🚢. Café, cafe\u{301}, naïve, Ωmega.",
        ),
    ];
    let mut versions = Vec::new();
    for (rel, name, description, body) in memories {
        let d = doc(name, description, body);
        let w = store
            .write_if(rel, &d, WriteMode::Overwrite, &ExpectedVersion::Absent)
            .await
            .map_err(during(format!("writing {rel}")))?;
        versions.push(w.version);
    }
    let listed = scanned_paths(&store).await?;
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    for ((rel, name, description, body), version) in memories.iter().zip(&versions) {
        let file = read(&store, rel).await?;
        same_memory(&file, rel, &doc(name, description, body))?;
        ensure!(
            content_version(&file.raw) == *version,
            "{rel}: the version read back is not the version written"
        );
        ensure!(
            listed.iter().filter(|p| p == rel).count() == 1,
            "scan must list {rel} once, exactly as written; it lists {listed:?}"
        );
        ensure!(
            entries
                .iter()
                .any(|e| e.file == *rel && e.title == *name && e.hook == *description),
            "the index must list {rel} with its title and description as written; it has {entries:?}"
        );
    }
    for (rel, ..) in memories {
        store
            .delete(rel)
            .await
            .map_err(during(format!("deleting {rel}")))?;
        ensure!(
            !exists(&store, rel).await?,
            "{rel} was read after its delete"
        );
    }
    Ok(())
}

/// Hostile input is refused without a trace, and odd-but-valid text stays in its memory.
pub(crate) async fn hostile_input(store: Store) -> Outcome {
    let long_segment = format!("{}.md", "a".repeat(260));
    for rel in [
        "nul\0byte.md",
        "line\nbreak.md",
        "escape\u{1b}[2J.md",
        "bell\u{7}.md",
        "..",
        "./here.md",
        "topics/./here.md",
        "topics/..",
        "C:\\Windows\\system.md",
        "\\\\server\\share\\x.md",
        "//server/share/x.md",
        long_segment.as_str(),
    ] {
        refused_path(&store, rel).await?;
    }
    for (what, d) in [
        (
            "an escape sequence in the title",
            doc("Deploy\u{1b}[31m", "d", "b"),
        ),
        ("a NUL in the title", doc("Deploy\0", "d", "b")),
        ("a bell in the description", doc("Deploy", "d\u{7}", "b")),
        (
            "a C1 control in the description",
            doc("Deploy", "d\u{9b}2J", "b"),
        ),
        ("a NUL in the body", doc("Deploy", "d", "before\0after")),
    ] {
        refused_write(&store, "controls.md", &d, what, |e| {
            matches!(e, MemoryError::InvalidName { .. })
        })
        .await?;
    }
    let limit = store.write_limits().max_text_bytes;
    let huge = doc(
        "Huge",
        "far over the limit",
        &"x".repeat(limit.saturating_mul(4)),
    );
    refused_write(
        &store,
        "huge.md",
        &huge,
        "a body four times the limit",
        too_large,
    )
    .await?;
    let listed = scanned_paths(&store).await?;
    ensure!(
        listed.is_empty(),
        "refused hostile writes left memories behind: {listed:?}"
    );

    let odd = [
        (
            "it's; DROP TABLE memories; --.md",
            doc(
                "Robert'); DROP TABLE memories;--",
                "'; DELETE FROM memories WHERE '1'='1",
                "SELECT * FROM memories;",
            ),
        ),
        (
            "a_b.md",
            doc(
                "Underscore",
                "a LIKE wildcard for one character",
                "underscore",
            ),
        ),
        (
            "axb.md",
            doc("Letter", "matches a_b as a LIKE pattern", "letter"),
        ),
        (
            "a%b.md",
            doc("Percent", "a LIKE wildcard for any text", "percent"),
        ),
        (
            "$(rm -rf ~) [x] (y) {z}.md",
            doc("Shell", "shell and Markdown syntax in a path", "shell"),
        ),
        (
            "frontmatter.md",
            doc(
                "Real title",
                "the real description",
                "---\nname: Injected\ntype: user\ndescription: injected\n---\nThe body holds a frontmatter block.\n---\n",
            ),
        ),
        (
            "yaml.md",
            doc(
                "Deploy: \"prod\" # not a comment",
                "- [x](evil.md) - a hook | with > YAML & Markdown *syntax*",
                "key: value\n- item\n> quote",
            ),
        ),
        (
            "terminal.md",
            doc(
                "Terminal",
                "escapes in a body",
                "red \u{1b}[31mtext\u{1b}[0m, a bell \u{7}, a tab\there, CR\rLF",
            ),
        ),
    ];
    for (rel, d) in &odd {
        store
            .write(rel, d, WriteMode::Overwrite)
            .await
            .map_err(during(format!("writing the valid path {rel:?}")))?;
    }
    for (rel, d) in &odd {
        same_memory(&read(&store, rel).await?, rel, d)?;
    }
    store
        .delete("a_b.md")
        .await
        .map_err(during("deleting a_b.md"))?;
    for (rel, _) in odd.iter().filter(|(rel, _)| *rel != "a_b.md") {
        ensure!(
            exists(&store, rel).await?,
            "deleting a_b.md also removed {rel:?}"
        );
    }
    let mut listed = scanned_paths(&store).await?;
    listed.sort();
    let mut expected: Vec<String> = odd
        .iter()
        .map(|(rel, _)| (*rel).to_owned())
        .filter(|rel| rel != "a_b.md")
        .collect();
    expected.sort();
    ensure!(
        listed == expected,
        "after the hostile writes the store must hold exactly {expected:?}; scan lists {listed:?}"
    );
    let entries = store
        .index_entries()
        .await
        .map_err(during("listing the index"))?;
    ensure!(
        !entries.iter().any(|e| e.file == "evil.md"),
        "a description with Markdown link syntax added an index entry: {entries:?}"
    );
    Ok(())
}
