//! The checks of the rules a backend owns beyond writing and reading one memory: scan order,
//! mtimes, path identity, write modes, missing memories, precise deletes, daily logs, the index
//! caps, batches, `clear`, every kind of change in the feed and cursor identity. Text in several
//! scripts throughout: a backend that mangles any of it fails here too.

use super::checks::{Outcome, Store, during, exists, read, same_body, same_memory, scanned_paths};
use super::support::rewrite_until_later;
use crate::changes::{ChangeCursor, Changes};
use crate::index::{INDEX_FILE, IndexCaps};
use crate::memory_path::MemoryPath;
use crate::memory_store::{CheckedWrite, ExpectedVersion, content_version};
use crate::team::MemoryScope;
use crate::types::{IndexEntry, MemoryDoc, MemoryError, MemoryHeader, MemoryType, WriteMode};
use std::collections::BTreeSet;

/// A project memory.
fn doc(name: &str, description: &str, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, description, MemoryType::Project, body)
}

/// Only a body: the fields a [`WriteMode::ReplaceBody`] or [`WriteMode::Append`] leaves alone.
fn body_only(body: &str) -> MemoryDoc {
    MemoryDoc {
        body: body.to_owned(),
        ..MemoryDoc::default()
    }
}

async fn put(store: &Store, rel: &str, d: &MemoryDoc) -> Result<String, String> {
    Ok(store
        .write_if(rel, d, WriteMode::Overwrite, &ExpectedVersion::Any)
        .await
        .map_err(during(format!("writing {rel}")))?
        .version)
}

async fn entries(store: &Store) -> Result<Vec<IndexEntry>, String> {
    store
        .index_entries()
        .await
        .map_err(during("listing the index"))
}

async fn version_of(store: &Store, rel: &str) -> Result<String, String> {
    Ok(content_version(&read(store, rel).await?.raw))
}

/// `Err` unless `result` is [`MemoryError::NotFound`].
fn not_found<T>(result: Result<T, MemoryError>, what: &str) -> Outcome {
    match result {
        Err(MemoryError::NotFound(_)) => Ok(()),
        Ok(_) => Err(format!("{what}: the store answered success, not NotFound")),
        Err(e) => Err(format!("{what}: the store answered `{e}`, not NotFound")),
    }
}

/// The scan's order is newest first by mtime, ties in path order.
fn in_scan_order(listed: &[MemoryHeader]) -> Outcome {
    for pair in listed.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        ensure!(
            a.mtime > b.mtime || (a.mtime == b.mtime && a.rel_path < b.rel_path),
            "scan must list memories newest first by mtime, the same mtime in path order; it \
             lists {} ({:?}) before {} ({:?})",
            a.rel_path,
            a.mtime,
            b.rel_path,
            b.mtime
        );
    }
    Ok(())
}

/// Newest first, ties by path, each memory once with the header a read gives.
pub(crate) async fn scan_order(store: Store) -> Outcome {
    let memories = [
        ("гамма.md", doc("Гамма", "третья буква", "γ")),
        ("beta.md", doc("Bêta", "la deuxième lettre", "β")),
        ("阿尔法.md", doc("阿尔法", "第一个字母", "α")),
    ];
    let mut last = None;
    for (rel, d) in &memories {
        put(&store, rel, d).await?;
        let mtime = read(&store, rel).await?.header.mtime;
        if let Some(previous) = last
            && mtime <= previous
        {
            last = Some(rewrite_until_later(&store, rel, d, WriteMode::Overwrite, previous).await?);
        } else {
            last = Some(mtime);
        }
    }
    let expect = |order: &[&str], listed: &[MemoryHeader]| -> Outcome {
        let paths: Vec<&str> = listed.iter().map(|h| h.rel_path.as_str()).collect();
        ensure!(
            paths == order,
            "scan must list memories newest first: written in the order {:?}, they are listed as \
             {paths:?}",
            order.iter().rev().collect::<Vec<_>>()
        );
        in_scan_order(listed)
    };
    let listed = store.scan().await.map_err(during("scanning"))?;
    expect(&["阿尔法.md", "beta.md", "гамма.md"], &listed)?;
    for h in &listed {
        let file = read(&store, &h.rel_path).await?;
        ensure!(
            h.name == file.header.name
                && h.description == file.header.description
                && h.memory_type == file.header.memory_type,
            "scan's header of {} ({:?}, {:?}, {:?}) is not what a read gives ({:?}, {:?}, {:?})",
            h.rel_path,
            h.name,
            h.description,
            h.memory_type,
            file.header.name,
            file.header.description,
            file.header.memory_type
        );
    }
    // A rewrite moves the oldest memory to the front.
    let newest = listed
        .first()
        .map(|h| h.mtime)
        .unwrap_or(std::time::UNIX_EPOCH);
    rewrite_until_later(
        &store,
        "гамма.md",
        &memories[0].1,
        WriteMode::Overwrite,
        newest,
    )
    .await?;
    let listed = store.scan().await.map_err(during("scanning"))?;
    expect(&["гамма.md", "阿尔法.md", "beta.md"], &listed)?;
    store
        .delete("beta.md")
        .await
        .map_err(during("deleting beta.md"))?;
    let listed = store.scan().await.map_err(during("scanning"))?;
    expect(&["гамма.md", "阿尔法.md"], &listed)?;
    ensure!(
        !listed
            .iter()
            .any(|h| h.rel_path.rsplit('/').next() == Some(INDEX_FILE)),
        "scan must never list an index file"
    );
    Ok(())
}

/// Every write that changes a memory moves its mtime forward, whatever the mode.
pub(crate) async fn mtimes(store: Store) -> Outcome {
    let d = doc("Horloge", "часы идут вперёд", "時計");
    put(&store, "horloge.md", &d).await?;
    let first = read(&store, "horloge.md").await?.header.mtime;
    let rewritten =
        rewrite_until_later(&store, "horloge.md", &d, WriteMode::Overwrite, first).await?;
    let appended =
        rewrite_until_later(&store, "horloge.md", &d, WriteMode::Append, rewritten).await?;
    rewrite_until_later(&store, "horloge.md", &d, WriteMode::ReplaceBody, appended).await?;
    // Another memory written later is not older.
    let last = read(&store, "horloge.md").await?.header.mtime;
    put(&store, "后来.md", &doc("后来", "written after", "之后")).await?;
    let later = read(&store, "后来.md").await?.header.mtime;
    ensure!(
        later >= last,
        "a memory written after another has an earlier mtime ({later:?} < {last:?})"
    );
    Ok(())
}

/// Paths are identities byte for byte: no case folding, no Unicode normalisation.
pub(crate) async fn path_identity(store: Store) -> Outcome {
    let pairs = [
        ("caf\u{e9}.md", "cafe\u{301}.md", "NFC and NFD forms of é"),
        ("Notes.md", "notes.md", "upper and lower case"),
        ("Отчёт.md", "отчёт.md", "Cyrillic upper and lower case"),
        (
            "报告/\u{c4}.md",
            "报告/A\u{308}.md",
            "NFC and NFD forms of Ä in a folder",
        ),
        ("STRASSE.md", "straße.md", "a full case fold (ß)"),
    ];
    let all: Vec<&str> = pairs.iter().flat_map(|(a, b, _)| [*a, *b]).collect();
    for (i, rel) in all.iter().enumerate() {
        let d = doc(
            &format!("Chemin {i}"),
            &format!("путь {i}"),
            &format!("路径 {i}: {rel}"),
        );
        let w = store
            .write_if(rel, &d, WriteMode::Overwrite, &ExpectedVersion::Absent)
            .await
            .map_err(|e| {
                format!(
                    "{rel:?} is a memory of its own (paths are compared byte for byte); creating \
                     it beside its twin failed with `{e}`"
                )
            })?;
        ensure!(
            w.report.created && w.report.rel_path == *rel,
            "writing {rel:?} beside its twin must create it under its own path; it reported {:?}",
            w.report
        );
    }
    for (i, rel) in all.iter().enumerate() {
        let file = read(&store, rel).await?;
        ensure!(
            file.header.rel_path == *rel && same_body(&file.body, &format!("路径 {i}: {rel}")),
            "{rel:?} was read back as {:?} with the body {:?}: two paths that differ in any byte \
             are two memories",
            file.header.rel_path,
            file.body
        );
    }
    let listed: BTreeSet<String> = scanned_paths(&store).await?.into_iter().collect();
    let want: BTreeSet<String> = all.iter().map(|s| (*s).to_owned()).collect();
    ensure!(
        listed == want,
        "scan must list each path exactly as written ({want:?}); it lists {listed:?}"
    );
    let indexed: BTreeSet<String> = entries(&store).await?.into_iter().map(|e| e.file).collect();
    ensure!(
        indexed == want,
        "the index must list each path exactly as written ({want:?}); it lists {indexed:?}"
    );
    for (a, b, what) in pairs {
        store
            .delete(a)
            .await
            .map_err(during(format!("deleting {a:?}")))?;
        ensure!(
            !exists(&store, a).await? && exists(&store, b).await?,
            "deleting {a:?} must leave {b:?} ({what}) and remove only {a:?}"
        );
    }
    Ok(())
}

/// Overwrite, append and replace-body each do what they say.
pub(crate) async fn write_modes(store: Store) -> Outcome {
    let raw = "---\nname: Режим записи\ndescription: comment nous écrivons\ntype: reference\nowner: платформа\n---\n\n旧的正文。\n";
    store
        .write_raw_if("modes.md", raw, &ExpectedVersion::Absent)
        .await
        .map_err(during("writing modes.md as a raw file"))?;

    // ReplaceBody: the stored frontmatter stays (unknown keys too), only the body changes.
    store
        .write(
            "modes.md",
            &body_only("Новое тело — nouveau corps."),
            WriteMode::ReplaceBody,
        )
        .await
        .map_err(during("replacing the body of modes.md"))?;
    let file = read(&store, "modes.md").await?;
    ensure!(
        file.header.name.as_deref() == Some("Режим записи")
            && file.header.description.as_deref() == Some("comment nous écrivons")
            && file.header.memory_type == Some(MemoryType::Reference),
        "a replace-body write whose doc sets no field must keep the stored title, description \
         and type; they became {:?}, {:?}, {:?}",
        file.header.name,
        file.header.description,
        file.header.memory_type
    );
    ensure!(
        same_body(&file.body, "Новое тело — nouveau corps."),
        "a replace-body write must replace the body (not keep or append to the old one); it is \
         {:?}",
        file.body
    );
    ensure!(
        file.raw.contains("owner") && file.raw.contains("платформа"),
        "a replace-body write must keep the stored frontmatter as written (the unknown key \
         `owner: платформа`); the text is {:?}",
        file.raw
    );
    // A field the doc sets is changed in place; the others stay.
    let retitled = MemoryDoc {
        description: "как мы пишем теперь".into(),
        ..body_only("第二个正文。")
    };
    store
        .write("modes.md", &retitled, WriteMode::ReplaceBody)
        .await
        .map_err(during("replacing the body and description of modes.md"))?;
    let file = read(&store, "modes.md").await?;
    ensure!(
        file.header.name.as_deref() == Some("Режим записи")
            && file.header.description.as_deref() == Some("как мы пишем теперь")
            && same_body(&file.body, "第二个正文。")
            && file.raw.contains("платформа"),
        "a replace-body write that sets the description must change it and the body only; read \
         back {:?}, {:?}, body {:?}, text {:?}",
        file.header.name,
        file.header.description,
        file.body,
        file.raw
    );

    // Append: the old body, then the new one; fields the doc leaves empty stay.
    store
        .write(
            "modes.md",
            &body_only("Ajouté à la fin."),
            WriteMode::Append,
        )
        .await
        .map_err(during("appending to modes.md"))?;
    let file = read(&store, "modes.md").await?;
    let (old, new) = (
        file.body.find("第二个正文。"),
        file.body.find("Ajouté à la fin."),
    );
    ensure!(
        matches!((old, new), (Some(o), Some(n)) if o < n),
        "an append must keep the old body and add the new one after it; the body is {:?}",
        file.body
    );
    ensure!(
        file.header.name.as_deref() == Some("Режим записи"),
        "an append whose doc has no title must keep the stored one; it is {:?}",
        file.header.name
    );

    // Overwrite: the whole memory is the doc's; nothing of the old text stays.
    let fresh = doc("Écrasé", "полностью заменено", "全新的正文。");
    store
        .write("modes.md", &fresh, WriteMode::Overwrite)
        .await
        .map_err(during("overwriting modes.md"))?;
    let file = read(&store, "modes.md").await?;
    same_memory(&file, "modes.md", &fresh)?;
    ensure!(
        !file.raw.contains("платформа") && !file.raw.contains("Ajouté"),
        "an overwrite must replace the whole memory (frontmatter and body); the text is {:?}",
        file.raw
    );

    // On a missing memory, append and replace-body write as overwrite does.
    for (rel, mode) in [
        ("новый-append.md", WriteMode::Append),
        ("新-replace.md", WriteMode::ReplaceBody),
    ] {
        let d = doc("Neu", "écrit comme une création", "Первый текст.");
        store
            .write(rel, &d, mode)
            .await
            .map_err(during(format!("writing the missing {rel} in {mode:?}")))?;
        same_memory(&read(&store, rel).await?, rel, &d)
            .map_err(|e| format!("{mode:?} of a missing memory must write it whole: {e}"))?;
    }
    Ok(())
}

/// Missing memories are `NotFound` for read, delete and rename; a rename never overwrites.
pub(crate) async fn missing_memories(store: Store) -> Outcome {
    not_found(store.read("нет.md").await, "reading a memory never written")?;
    not_found(
        store.delete("нет.md").await,
        "deleting a memory never written",
    )?;
    put(&store, "был.md", &doc("Был", "écrit puis effacé", "一次")).await?;
    store
        .delete("был.md")
        .await
        .map_err(during("deleting был.md"))?;
    not_found(
        store.delete("был.md").await,
        "deleting был.md a second time",
    )?;
    not_found(store.read("был.md").await, "reading a deleted memory")?;
    not_found(
        store.rename("нет.md", "куда.md").await,
        "renaming a memory never written",
    )?;
    ensure!(
        !exists(&store, "куда.md").await?,
        "renaming a missing memory created its target"
    );

    let source = doc("源", "la source", "源文本。");
    let target = doc("目标", "la cible", "目标文本。");
    let vs = put(&store, "源.md", &source).await?;
    let vt = put(&store, "目标.md", &target).await?;
    let paths: Vec<MemoryPath> = ["源.md", "нет.md", "目标.md"]
        .iter()
        .map(|p| MemoryPath::new(p).map_err(during(format!("naming {p}"))))
        .collect::<Result<_, _>>()?;
    let mut many = store.read_paths(&paths).await.into_iter();
    ensure!(
        many.len() == 3,
        "reading 源.md, нет.md and 目标.md at once gave {} answers, not 3",
        many.len()
    );
    for (rel, doc) in [
        ("源.md", Some(&source)),
        ("нет.md", None),
        ("目标.md", Some(&target)),
    ] {
        let answer = many.next().ok_or_else(|| format!("no answer for {rel}"))?;
        match doc {
            Some(doc) => {
                let file = answer.map_err(during(format!("reading {rel} with two others")))?;
                same_memory(&file, rel, doc).map_err(|e| {
                    format!("reading several at once must answer each in its place: {e}")
                })?;
            }
            None => not_found(answer, "reading нет.md between two memories")?,
        }
    }
    let before = entries(&store).await?;
    ensure!(
        store.rename("源.md", "目标.md").await.is_err(),
        "renaming 源.md onto the existing 目标.md was accepted: a rename never overwrites"
    );
    ensure!(
        version_of(&store, "源.md").await? == vs && version_of(&store, "目标.md").await? == vt,
        "a refused rename changed 源.md or 目标.md"
    );
    ensure!(
        entries(&store).await? == before,
        "a refused rename changed the index"
    );

    store
        .rename("源.md", "移动/目标.md")
        .await
        .map_err(during("renaming 源.md to 移动/目标.md"))?;
    not_found(store.read("源.md").await, "reading 源.md after its rename")?;
    same_memory(
        &read(&store, "移动/目标.md").await?,
        "移动/目标.md",
        &source,
    )
    .map_err(|e| format!("a rename must move the memory as it was: {e}"))?;
    let listed = scanned_paths(&store).await?;
    ensure!(
        listed.contains(&"移动/目标.md".to_owned()) && !listed.contains(&"源.md".to_owned()),
        "after a rename scan must list the new path and not the old one; it lists {listed:?}"
    );
    let after = entries(&store).await?;
    ensure!(
        after.iter().filter(|e| e.file == "移动/目标.md").count() == 1
            && !after.iter().any(|e| e.file == "源.md"),
        "a rename must move the index entry to the new path; the index has {after:?}"
    );
    Ok(())
}

/// A delete removes exactly its memory and its index entry.
pub(crate) async fn delete_precision(store: Store) -> Outcome {
    let rels = [
        "z-before.md",
        "a.md",
        "a.md.md",
        "ab.md",
        "a/b.md",
        "x/a.md",
        "team/a.md",
        "заметка.md",
        "заметка.md.md",
        "заметка-2.md",
        "z-after.md",
    ];
    for (i, rel) in rels.iter().enumerate() {
        put(
            &store,
            rel,
            &doc(
                &format!("Mémoire {i}"),
                &format!("заметка {i}"),
                &format!("笔记 {i}"),
            ),
        )
        .await?;
    }
    let mut versions = Vec::new();
    for rel in rels {
        versions.push((rel, version_of(&store, rel).await?));
    }
    let index_before = entries(&store).await?;
    for gone in ["a.md", "заметка.md", "team/a.md"] {
        store
            .delete(gone)
            .await
            .map_err(during(format!("deleting {gone}")))?;
        ensure!(
            !exists(&store, gone).await?,
            "{gone} was read after its delete"
        );
    }
    let deleted = ["a.md", "заметка.md", "team/a.md"];
    let listed = scanned_paths(&store).await?;
    let index_after = entries(&store).await?;
    for (rel, version) in versions.iter().filter(|(r, _)| !deleted.contains(r)) {
        ensure!(
            exists(&store, rel).await? && version_of(&store, rel).await? == *version,
            "deleting {deleted:?} removed or changed {rel}: a delete removes exactly its memory"
        );
        ensure!(
            listed.iter().filter(|p| p == rel).count() == 1,
            "after deleting {deleted:?} scan must still list {rel}; it lists {listed:?}"
        );
        let before: Vec<_> = index_before.iter().filter(|e| e.file == *rel).collect();
        let after: Vec<_> = index_after.iter().filter(|e| e.file == *rel).collect();
        ensure!(
            before == after && after.len() == 1,
            "deleting {deleted:?} changed the index entry of {rel} (before {before:?}, after \
             {after:?})"
        );
    }
    ensure!(
        !index_after
            .iter()
            .any(|e| deleted.contains(&e.file.as_str())),
        "the index still lists a deleted memory: {index_after:?}"
    );
    Ok(())
}

/// Daily logs are memories without index entries.
pub(crate) async fn daily_logs(store: Store) -> Outcome {
    let logs = [
        (
            "logs/2024/05/2024-05-14.md",
            "Журнал 14 мая",
            "что было сегодня",
        ),
        (
            "logs/2025/01/2025-01-02.md",
            "日志 一月二日",
            "今天发生了什么",
        ),
    ];
    for (rel, name, description) in logs {
        put(
            &store,
            rel,
            &doc(name, description, "Заметки дня. Notes du jour."),
        )
        .await?;
        store
            .write(rel, &body_only("Ещё одна строка."), WriteMode::Append)
            .await
            .map_err(during(format!("appending to {rel}")))?;
    }
    put(
        &store,
        "решения.md",
        &doc("Решения", "les décisions", "决定。"),
    )
    .await?;
    let listed = scanned_paths(&store).await?;
    for (rel, name, _) in logs {
        ensure!(
            listed.iter().any(|p| p == rel),
            "scan must list the daily log {rel}; it lists {listed:?}"
        );
        let file = read(&store, rel).await?;
        ensure!(
            file.header.name.as_deref() == Some(name),
            "the daily log {rel} was read back with the title {:?}",
            file.header.name
        );
    }
    let indexed = entries(&store).await?;
    ensure!(
        !indexed
            .iter()
            .any(|e| crate::memory_path::is_daily_log(&e.file)),
        "a daily log (under logs/) gets no index entry; the index has {indexed:?}"
    );
    ensure!(
        indexed.iter().any(|e| e.file == "решения.md"),
        "the index must list решения.md; it has {indexed:?}"
    );
    for scope in [MemoryScope::Private, MemoryScope::Team] {
        let loaded = store
            .load_scope_index(scope)
            .await
            .map_err(during("loading an index"))?;
        ensure!(
            !loaded.content.contains("logs/"),
            "a daily log gets no line in the {scope:?} index; it is {:?}",
            loaded.content
        );
    }
    Ok(())
}

/// The index: entries in the order memories were first written, `load_index` capped at 200
/// lines and 25,000 bytes with the warning, `index_entries` uncapped.
pub(crate) async fn index_caps(store: Store) -> Outcome {
    let caps = IndexCaps::default();
    // Long lines first: fewer than 200 of them pass the byte cap.
    let title = "长标题".repeat(14);
    let description = "очень длинное описание ".repeat(5);
    let long = 90;
    let mut written = Vec::new();
    for i in 0..long {
        let rel = format!("длинные/{i:02}.md");
        put(
            &store,
            &rel,
            &doc(&format!("{title}{i}"), &description, "正文"),
        )
        .await?;
        written.push(rel);
    }
    let loaded = store
        .load_index()
        .await
        .map_err(during("loading the index"))?;
    let kept = loaded
        .content
        .split("\n\n> WARNING")
        .next()
        .unwrap_or_default();
    ensure!(
        loaded.truncated_by_bytes && !loaded.truncated_by_lines,
        "{long} index lines of about 300 bytes each are over the {}-byte cap and under the \
         {}-line cap: load_index must cut by bytes only (cut by bytes: {}, by lines: {})",
        caps.max_bytes,
        caps.max_lines,
        loaded.truncated_by_bytes,
        loaded.truncated_by_lines
    );
    ensure!(
        kept.len() <= caps.max_bytes && loaded.content.contains("WARNING"),
        "load_index must keep at most {} bytes of the index and then warn; it kept {} bytes \
         (warning: {})",
        caps.max_bytes,
        kept.len(),
        loaded.content.contains("WARNING")
    );
    // Short lines until there are more than 200.
    let short = caps.max_lines + 20 - long;
    for i in 0..short {
        let rel = format!("short/{i:03}.md");
        put(&store, &rel, &doc(&format!("Note {i}"), "brève", "b")).await?;
        written.push(rel);
    }
    // A rewrite keeps its entry's place.
    put(
        &store,
        "длинные/00.md",
        &doc("Переписано", "réécrit", "改写"),
    )
    .await?;
    let loaded = store
        .load_index()
        .await
        .map_err(during("loading the index"))?;
    let kept = loaded
        .content
        .split("\n\n> WARNING")
        .next()
        .unwrap_or_default();
    ensure!(
        loaded.truncated_by_lines && kept.lines().count() <= caps.max_lines,
        "{} index lines: load_index must keep at most {} and say it cut by lines (kept {}, cut \
         by lines: {})",
        written.len(),
        caps.max_lines,
        kept.lines().count(),
        loaded.truncated_by_lines
    );
    ensure!(
        !loaded.content.contains("(short/219.md)"),
        "load_index must cut the index at the line cap; the last line is still loaded"
    );
    let all = entries(&store).await?;
    let files: Vec<&str> = all.iter().map(|e| e.file.as_str()).collect();
    ensure!(
        files == written.iter().map(String::as_str).collect::<Vec<_>>(),
        "index_entries is uncapped and lists memories in the order they were first written (a \
         rewrite keeps its place): {} entries expected in order, it has {} ({:?} ...)",
        written.len(),
        files.len(),
        files.iter().take(3).collect::<Vec<_>>()
    );
    ensure!(
        all.first()
            .is_some_and(|e| e.title == "Переписано" && e.hook == "réécrit"),
        "the index entry is the title then the description, updated in place by a rewrite; the \
         first entry is {:?}",
        all.first()
    );
    Ok(())
}

/// A batch is written whole or not at all.
pub(crate) async fn batches(store: Store) -> Outcome {
    let limits = store.write_limits();
    let checked = |rel: &str, d: &MemoryDoc| {
        CheckedWrite::check(rel, d, WriteMode::Overwrite, limits)
            .map_err(|e| format!("the suite's write of {rel}: {e}"))
    };
    let va = put(&store, "批/甲.md", &doc("甲", "первый", "原文")).await?;
    let stale = content_version("not what is stored");
    let batch = vec![
        (
            checked("批/甲.md", &doc("甲", "первый", "新文"))?,
            ExpectedVersion::Is(va.clone()),
        ),
        (
            checked("批/乙.md", &doc("乙", "второй", "新"))?,
            ExpectedVersion::Absent,
        ),
        (
            checked("Über/c.md", &doc("Ç", "troisième", "x"))?,
            ExpectedVersion::Is(stale),
        ),
    ];
    match store.write_checked_batch(batch).await {
        Err(MemoryError::VersionConflict { path, .. }) => ensure!(
            path == "Über/c.md",
            "the batch's conflict must name Über/c.md; it names {path}"
        ),
        Ok(_) => return Err("a batch with a stale expectation was written".into()),
        Err(e) => {
            return Err(format!(
                "a batch with a stale expectation failed with `{e}`"
            ));
        }
    }
    ensure!(
        version_of(&store, "批/甲.md").await? == va
            && !exists(&store, "批/乙.md").await?
            && !exists(&store, "Über/c.md").await?,
        "a batch that conflicted must leave nothing written: 批/甲.md changed or 批/乙.md or \
         Über/c.md exists"
    );
    let batch = vec![
        (
            checked("批/甲.md", &doc("甲", "первый", "新文"))?,
            ExpectedVersion::Is(va),
        ),
        (
            checked("批/乙.md", &doc("乙", "второй", "新"))?,
            ExpectedVersion::Absent,
        ),
    ];
    let written = store
        .write_checked_batch(batch)
        .await
        .map_err(during("writing a batch"))?;
    ensure!(
        written.len() == 2,
        "a batch of two writes reported {} versions",
        written.len()
    );
    for (w, rel) in written.iter().zip(["批/甲.md", "批/乙.md"]) {
        ensure!(
            w.version == version_of(&store, rel).await?,
            "a batch must report the version of the text a read of {rel} returns"
        );
    }
    Ok(())
}

/// `clear` deletes every memory and both indexes and says what it deleted.
pub(crate) async fn clear(store: Store) -> Outcome {
    let rels = [
        "одна.md",
        "team/две.md",
        "logs/2024/01/2024-01-01.md",
        "深/三.md",
        "ça.md",
    ];
    for rel in rels {
        put(&store, rel, &doc("Effacé", "будет удалено", "全部删除")).await?;
    }
    let cleared: BTreeSet<String> = store
        .clear()
        .await
        .map_err(during("clearing the store"))?
        .into_iter()
        .collect();
    let want: BTreeSet<String> = rels.iter().map(|s| (*s).to_owned()).collect();
    ensure!(
        cleared == want,
        "clear must delete every memory (team memories and daily logs too) and return them \
         ({want:?}); it returned {cleared:?}"
    );
    for rel in rels {
        ensure!(!exists(&store, rel).await?, "{rel} was read after clear");
    }
    let listed = scanned_paths(&store).await?;
    ensure!(listed.is_empty(), "scan lists {listed:?} after clear");
    let indexed = entries(&store).await?;
    ensure!(
        indexed.is_empty(),
        "the index holds {indexed:?} after clear"
    );
    for scope in [MemoryScope::Private, MemoryScope::Team] {
        let loaded = store
            .load_scope_index(scope)
            .await
            .map_err(during("loading an index"))?;
        ensure!(
            loaded.content.trim().is_empty(),
            "the {scope:?} index is {:?} after clear",
            loaded.content
        );
    }
    put(&store, "после.md", &doc("После", "after clear", "新的")).await?;
    let indexed = entries(&store).await?;
    ensure!(
        indexed.len() == 1 && indexed[0].file == "после.md",
        "after clear and one write the index must list that memory alone; it has {indexed:?}"
    );
    Ok(())
}

/// What the feed said after one change: `Err` on "unchanged" or a wrong list; the cursor to
/// ask from next (`None`: the store gave none, stop).
fn reported(
    answer: Changes,
    kind: &str,
    written: &[&str],
    removed: &[&str],
) -> Result<Option<ChangeCursor>, String> {
    match answer {
        Changes::Unchanged => Err(format!(
            "after {kind} the feed answered `Unchanged`: every kind of change is reported or a \
             rescan asked for"
        )),
        Changes::Rescan { cursor } => Ok(cursor),
        Changes::Changed {
            cursor,
            written: w,
            removed: r,
            ..
        } => {
            for rel in written {
                ensure!(
                    w.iter().any(|h| h.rel_path == *rel),
                    "after {kind} the changes must list {rel} as written; written {w:?}, \
                     removed {r:?}"
                );
            }
            for rel in removed {
                ensure!(
                    r.iter().any(|p| p.as_str() == *rel) && !w.iter().any(|h| h.rel_path == *rel),
                    "after {kind} the changes must list {rel} as removed; written {w:?}, removed \
                     {r:?}"
                );
            }
            Ok(Some(cursor))
        }
    }
}

/// Every kind of change is in the feed: create, rewrite, append, replace-body, rename, batch,
/// delete and clear.
pub(crate) async fn every_change(store: Store) -> Outcome {
    let Changes::Rescan { cursor } = store
        .changes(None)
        .await
        .map_err(during("asking for changes"))?
    else {
        return Err("without a cursor the feed must ask for a rescan".into());
    };
    let Some(mut cursor) = cursor else {
        // No feed: the change-feed check has seen it answer every question with a rescan.
        return Ok(());
    };
    let limits = store.write_limits();
    let d = doc("Лента", "le fil des changements", "第一版");
    let steps: [(&str, &[&str], &[&str]); 8] = [
        ("a create", &["лента.md"], &[]),
        ("a rewrite", &["лента.md"], &[]),
        ("an append", &["лента.md"], &[]),
        ("a replace-body write", &["лента.md"], &[]),
        ("a rename", &["新/лента.md"], &["лента.md"]),
        ("a batch", &["批/一.md", "批/二.md"], &[]),
        ("a delete", &[], &["批/一.md"]),
        ("clear", &[], &["新/лента.md", "批/二.md"]),
    ];
    for (step, (kind, written, removed)) in steps.into_iter().enumerate() {
        let done = match step {
            0 => store
                .write("лента.md", &d, WriteMode::Overwrite)
                .await
                .map(|_| ()),
            1 => store
                .write(
                    "лента.md",
                    &doc("Лента", "réécrite", "第二版"),
                    WriteMode::Overwrite,
                )
                .await
                .map(|_| ()),
            2 => store
                .write("лента.md", &body_only("追加"), WriteMode::Append)
                .await
                .map(|_| ()),
            3 => store
                .write("лента.md", &body_only("替换"), WriteMode::ReplaceBody)
                .await
                .map(|_| ()),
            4 => store.rename("лента.md", "新/лента.md").await.map(|_| ()),
            5 => {
                let mut batch = Vec::new();
                for rel in ["批/一.md", "批/二.md"] {
                    let w = CheckedWrite::check(
                        rel,
                        &doc("批", "lot", "一批"),
                        WriteMode::Overwrite,
                        limits,
                    )
                    .map_err(|e| format!("the suite's batch write of {rel}: {e}"))?;
                    batch.push((w, ExpectedVersion::Absent));
                }
                store.write_checked_batch(batch).await.map(|_| ())
            }
            6 => store.delete("批/一.md").await,
            _ => store.clear().await.map(|_| ()),
        };
        done.map_err(during(format!("making {kind}")))?;
        let answer = store
            .changes(Some(&cursor))
            .await
            .map_err(during(format!("asking for changes after {kind}")))?;
        match reported(answer, kind, written, removed)? {
            Some(next) => cursor = next,
            None => return Ok(()),
        }
    }
    Ok(())
}

/// A cursor the store did not issue (another store's, or garbage) gets a rescan.
pub(crate) async fn cursor_identity(store: Store, other: Option<Store>) -> Outcome {
    let Changes::Rescan { cursor: start } = store
        .changes(None)
        .await
        .map_err(during("asking for changes"))?
    else {
        return Err("without a cursor the feed must ask for a rescan".into());
    };
    put(
        &store,
        "курсор.md",
        &doc("Curseur", "чей это курсор", "游标"),
    )
    .await?;
    let mut foreign: Vec<(String, ChangeCursor)> = [
        "",
        "0",
        "-1",
        "18446744073709551616",
        "💥",
        "\u{0}",
        "garbage|x|1",
        "курсор:1:1",
        "pg-snapshot-1|other|1:1:",
        "sqlite|other|1",
    ]
    .into_iter()
    .map(|c| (format!("the garbage cursor {c:?}"), ChangeCursor::new(c)))
    .collect();
    if let Some(other) = other {
        // Another store of the same backend: its cursor once behind this store's position and
        // once ahead of it (a store that compares positions only would take either).
        for (i, (what, writes)) in [("behind", 1), ("ahead of", 6)].into_iter().enumerate() {
            for j in 0..writes {
                put(
                    &other,
                    &format!("другой/{i}-{j}.md"),
                    &doc("Autre", "другой склад", "别的"),
                )
                .await?;
            }
            if let Changes::Rescan {
                cursor: Some(theirs),
            } = other
                .changes(None)
                .await
                .map_err(during("asking the other store for changes"))?
            {
                foreign.push((
                    format!("a cursor another store issued ({what} this store's position)"),
                    theirs,
                ));
            }
            if i == 0 {
                for j in 0..2 {
                    put(&store, &format!("свой/{j}.md"), &doc("Soi", "свой", "自己")).await?;
                }
            }
        }
    }
    for (what, cursor) in &foreign {
        let answer = store
            .changes(Some(cursor))
            .await
            .map_err(during(format!("asking for changes since {what}")))?;
        match (&start, answer) {
            (Some(_), Changes::Rescan { .. }) | (None, Changes::Rescan { cursor: None }) => {}
            (_, answer) => {
                return Err(format!(
                    "{what} is not this store's: it must get a rescan; the store answered \
                     {answer:?}"
                ));
            }
        }
    }
    Ok(())
}
