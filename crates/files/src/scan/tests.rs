//! Scanning a memory dir, including hostile files and the real Claude Code dirs.

use super::*;
use memloop_store::MemoryType;
use memloop_store::format_manifest;
use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tempfile::TempDir;

fn put(dir: &Path, rel: &str, bytes: &[u8], mtime_secs: u64) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    let mut f = File::create(&p).unwrap();
    f.write_all(bytes).unwrap();
    f.set_modified(UNIX_EPOCH + Duration::from_secs(mtime_secs))
        .unwrap();
}

fn mem(name: &str, t: &str) -> Vec<u8> {
    format!("---\nname: {name}\ndescription: about {name}\ntype: {t}\n---\n\nbody\n").into_bytes()
}

#[test]
fn recursive_newest_first_skipping_index_hidden_and_non_md() {
    let d = TempDir::new().unwrap();
    put(d.path(), "old.md", &mem("old", "user"), 1_000);
    put(
        d.path(),
        "sub/deeper/new.md",
        &mem("new", "feedback"),
        3_000,
    );
    put(d.path(), "mid.md", &mem("mid", "nope"), 2_000);
    put(d.path(), "MEMORY.md", b"- [old](old.md)\n", 9_000);
    put(d.path(), "sub/MEMORY.md", b"nested index\n", 9_000);
    put(d.path(), ".hidden.md", &mem("h", "user"), 9_000);
    put(d.path(), ".git/x.md", &mem("g", "user"), 9_000);
    put(d.path(), "notes.txt", b"not markdown", 9_000);
    put(d.path(), ".gitkeep", b"", 9_000);
    let h = scan_dir(d.path(), &ScanConfig::default()).unwrap();
    let paths: Vec<_> = h.iter().map(|h| h.rel_path.as_str()).collect();
    assert_eq!(paths, ["sub/deeper/new.md", "mid.md", "old.md"]);
    assert_eq!(h[0].memory_type, Some(MemoryType::Feedback));
    assert_eq!(h[1].memory_type, None, "unknown type kept as no type");
    assert_eq!(
        format_manifest(&h),
        "- [feedback] sub/deeper/new.md (1970-01-01T00:50:00Z): about new\n- mid.md (1970-01-01T00:33:20Z): about mid\n- [user] old.md (1970-01-01T00:16:40Z): about old"
    );
}

#[test]
fn missing_dir_is_empty() {
    let d = TempDir::new().unwrap();
    assert!(
        scan_dir(&d.path().join("nope"), &ScanConfig::default())
            .unwrap()
            .is_empty()
    );
}

#[test]
fn hostile_files_are_skipped_or_bounded() {
    let d = TempDir::new().unwrap();
    // 10 MB with frontmatter then one giant line: listed from its first bytes.
    let mut big = mem("big", "project");
    big.extend(std::iter::repeat_n(b'z', 10 * 1024 * 1024));
    put(d.path(), "big.md", &big, 10);
    // 10 MB single line without newline and no frontmatter: listed by filename.
    put(d.path(), "oneline.md", &vec![b'q'; 10 * 1024 * 1024], 9);
    // Binary: skipped. Invalid UTF-8: read lossily.
    put(d.path(), "binary.md", b"---\nname: b\x00\x01\x02\n---\n", 8);
    put(d.path(), "latin1.md", b"---\nname: caf\xe9\n---\n", 7);
    // Frontmatter longer than the 30-line window: listed by filename without fields.
    let mut long = String::from("---\nname: long\n");
    (0..40).for_each(|i| long.push_str(&format!("k{i}: v\n")));
    long.push_str("type: user\n---\nbody\n");
    put(d.path(), "long.md", long.as_bytes(), 6);
    // Frontmatter of exactly 30 lines (fences included) is parsed.
    let mut edge = String::from("---\nname: edge\n");
    (0..27).for_each(|i| edge.push_str(&format!("k{i}: v\n")));
    edge.push_str("---\nbody\n");
    put(d.path(), "edge.md", edge.as_bytes(), 5);
    // Unreadable (permission) file: skipped (root ignores modes, so only assert when it bites).
    put(d.path(), "locked.md", &mem("locked", "user"), 4);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(
            d.path().join("locked.md"),
            std::fs::Permissions::from_mode(0o000),
        )
        .unwrap();
    }
    let locked_readable = File::open(d.path().join("locked.md")).is_ok();

    let h = scan_dir(d.path(), &ScanConfig::default()).unwrap();
    let get = |p: &str| h.iter().find(|h| h.rel_path == p);
    assert_eq!(
        get("big.md").unwrap().memory_type,
        Some(MemoryType::Project)
    );
    assert_eq!(get("oneline.md").unwrap().name, None);
    assert!(get("binary.md").is_none());
    assert_eq!(
        get("latin1.md").unwrap().name.as_deref(),
        Some("caf\u{fffd}")
    );
    let long = get("long.md").unwrap();
    assert_eq!((long.name.as_deref(), long.memory_type), (None, None));
    assert_eq!(get("edge.md").unwrap().name.as_deref(), Some("edge"));
    assert_eq!(get("locked.md").is_some(), locked_readable);
}

#[test]
fn symlinks_are_followed_only_to_files_inside_the_dir() {
    let d = TempDir::new().unwrap();
    let outside = TempDir::new().unwrap();
    put(outside.path(), "secret.md", &mem("secret", "user"), 1);
    put(d.path(), "real.md", &mem("real", "user"), 1);
    #[cfg(unix)]
    {
        std::os::unix::fs::symlink(outside.path(), d.path().join("linked-dir")).unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret.md"), d.path().join("link.md"))
            .unwrap();
        std::os::unix::fs::symlink(d.path(), d.path().join("loop")).unwrap();
        std::os::unix::fs::symlink(d.path().join("real.md"), d.path().join("alias.md")).unwrap();
    }
    let h = scan_dir(d.path(), &ScanConfig::default()).unwrap();
    let mut listed: Vec<&str> = h.iter().map(|h| h.rel_path.as_str()).collect();
    listed.sort_unstable();
    assert_eq!(listed, ["alias.md", "real.md"]);
}

#[test]
fn parallel_and_serial_scans_agree() {
    let d = TempDir::new().unwrap();
    for i in 0..300u64 {
        put(
            d.path(),
            &format!("d{}/m{i}.md", i % 7),
            &mem(&format!("m{i}"), "user"),
            1_000 + i,
        );
    }
    let par = scan_dir(
        d.path(),
        &ScanConfig {
            threads: 4,
            ..ScanConfig::default()
        },
    )
    .unwrap();
    let ser = scan_dir(
        d.path(),
        &ScanConfig {
            threads: 1,
            ..ScanConfig::default()
        },
    )
    .unwrap();
    assert_eq!(par, ser);
    assert_eq!(par.len(), 300);
    assert!(par.windows(2).all(|w| w[0].mtime >= w[1].mtime));
    assert!(par[0].mtime > SystemTime::UNIX_EPOCH);
}

fn realmem() -> Option<PathBuf> {
    let p = memloop_testkit::shared_data().join("realmem");
    if p.is_dir() {
        return Some(p);
    }
    // Outside CI the test skips; under CI the missing data fails it.
    memloop_testkit::skip_unless_ci(format!(
        "{} is absent; real Claude Code memory dirs not tested",
        p.display()
    ));
    None
}

/// Every memory dir (a directory holding a MEMORY.md or memory files) under realmem.
fn memory_dirs(root: &Path, out: &mut Vec<PathBuf>) {
    let mut has_md = false;
    for e in std::fs::read_dir(root).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() && !p.ends_with(".git") {
            memory_dirs(&p, out);
        } else if p.extension().is_some_and(|x| x == "md") {
            has_md = true;
        }
    }
    if has_md {
        out.push(root.to_path_buf());
    }
}

/// The type a reader of the first 30 lines would give: a flat or nested `type:` line.
fn expected_type(text: &str) -> Option<MemoryType> {
    text.lines()
        .take(30)
        .find_map(|l| l.trim().strip_prefix("type:"))
        .and_then(|t| MemoryType::parse(t.trim()))
}

#[test]
fn real_claude_code_dirs_list_every_memory() {
    let Some(root) = realmem() else { return };
    let mut dirs = Vec::new();
    memory_dirs(&root, &mut dirs);
    let (mut total, mut typed, mut nested, mut repaired_desc) = (0, 0, 0, 0);
    for dir in dirs {
        let h = scan_dir(&dir, &ScanConfig::default()).unwrap();
        let mut on_disk: Vec<String> = std::fs::read_dir(&dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().into_string().unwrap())
            .filter(|n| n.ends_with(".md") && n != "MEMORY.md" && !n.starts_with('.'))
            .collect();
        on_disk.sort();
        let mut listed: Vec<String> = h.iter().map(|h| h.rel_path.clone()).collect();
        listed.sort();
        assert_eq!(listed, on_disk, "{}", dir.display());
        for hd in &h {
            let text = std::fs::read_to_string(dir.join(&hd.rel_path)).unwrap();
            total += 1;
            assert_eq!(hd.memory_type, expected_type(&text), "{}", hd.rel_path);
            assert!(
                hd.description.is_some(),
                "{} lost its description",
                hd.rel_path
            );
            typed += usize::from(hd.memory_type.is_some());
            nested += usize::from(text.contains("\nmetadata:"));
            let strict = serde_norway::from_str::<serde_norway::Value>(
                text.split("---").nth(1).unwrap_or(""),
            )
            .is_err();
            repaired_desc += usize::from(strict);
        }
    }
    eprintln!(
        "realmem: {total} memories, {typed} typed, {nested} nested-metadata, {repaired_desc} needed the quoting retry"
    );
    assert!(
        total > 100 && nested > 50 && repaired_desc > 0,
        "{total} {nested} {repaired_desc}"
    );
}

#[test]
fn cached_rescans_see_changes_and_deletions() {
    let d = TempDir::new().unwrap();
    for i in 0..100u64 {
        put(
            d.path(),
            &format!("m{i}.md"),
            &mem(&format!("m{i}"), "user"),
            1_000 + i,
        );
    }
    let cache = HeaderCache::default();
    let cfg = ScanConfig::default();
    let first = scan_dir_cached(d.path(), &cfg, &cache).unwrap();
    assert_eq!(first, scan_dir(d.path(), &cfg).unwrap());
    assert_eq!(cache.len(), 100);
    // Same size, new mtime: re-read. New content with the same mtime but another size: re-read.
    put(d.path(), "m5.md", &mem("m5", "feedback"), 5_000);
    put(d.path(), "m6.md", &mem("m6-renamed", "user"), 1_006);
    std::fs::remove_file(d.path().join("m7.md")).unwrap();
    let second = scan_dir_cached(d.path(), &cfg, &cache).unwrap();
    assert_eq!(second, scan_dir(d.path(), &cfg).unwrap());
    assert_eq!(second[0].rel_path, "m5.md");
    assert_eq!(second[0].memory_type, Some(MemoryType::Feedback));
    assert!(
        second
            .iter()
            .any(|h| h.name.as_deref() == Some("m6-renamed"))
    );
    assert_eq!((second.len(), cache.len()), (99, 99));
}

#[test]
fn skipped_files_are_remembered_until_they_change() {
    let d = TempDir::new().unwrap();
    put(d.path(), "good.md", &mem("good", "user"), 1_000);
    put(d.path(), "binary.md", b"---\nname: x\0\n", 1_001);
    put(d.path(), "latin1.md", b"caf\xe9 au lait\n", 1_002);
    let (cache, cfg) = (
        HeaderCache::default(),
        ScanConfig {
            threads: 1,
            ..ScanConfig::default()
        },
    );
    let warnings = memloop_testkit::Warnings::default();
    let first = warnings.capture(|| scan_dir_cached(d.path(), &cfg, &cache).unwrap());
    assert_eq!(first.len(), 2, "the Latin-1 file is listed, read lossily");
    assert_eq!(
        warnings.messages().len(),
        2,
        "one warning for the skipped file, one for the lossy read"
    );
    assert_eq!((cache.len(), cache.skipped()), (2, 1));

    let second = warnings.capture(|| scan_dir_cached(d.path(), &cfg, &cache).unwrap());
    assert_eq!(second, first);
    assert_eq!(warnings.messages().len(), 2, "unchanged files are silent");
    assert_eq!((cache.len(), cache.skipped()), (2, 1));

    // Fixed: read again and listed; deleted: dropped from the cache.
    put(d.path(), "binary.md", &mem("fixed", "project"), 1_003);
    std::fs::remove_file(d.path().join("latin1.md")).unwrap();
    let third = warnings.capture(|| scan_dir_cached(d.path(), &cfg, &cache).unwrap());
    assert_eq!(third[0].name.as_deref(), Some("fixed"));
    assert_eq!(warnings.messages().len(), 2);
    assert_eq!((cache.len(), cache.skipped()), (2, 0));
}
