//! FileMemoryStore (write + index line, read, delete, rename), the memory tools and the prompt
//! section, over real tempdirs.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stderr,
    clippy::print_stdout
)] // test helpers

use memloop_core::{
    prompt::SystemSection,
    tool::{PermissionDecision, PermissionGate, ToolCallRequest},
};
use memloop_files::FileMemoryStore;
use memloop_memory::{
    prompt::MemorySection,
    tools::{MEMORY_READ, memory_tools},
};
use memloop_store::{MemoryDoc, MemoryError, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::tool_context;
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::Arc;
use tempfile::TempDir;

fn doc(name: &str, desc: &str, t: Option<MemoryType>, body: &str) -> MemoryDoc {
    MemoryDoc {
        name: name.into(),
        description: desc.into(),
        memory_type: t,
        body: body.into(),
    }
}

fn store() -> (TempDir, FileMemoryStore) {
    let d = TempDir::new().unwrap();
    let s = FileMemoryStore::open(d.path().join("memory")).unwrap();
    (d, s)
}

#[tokio::test]
async fn write_read_update_delete_keep_index_in_step() {
    let (_d, s) = store();
    std::fs::write(
        s.root().join("MEMORY.md"),
        "# My memory\n\nFree prose stays.\n",
    )
    .unwrap();
    let r = s
        .write(
            "user_role.md",
            &doc(
                "Role",
                "data scientist, new to Rust",
                Some(MemoryType::User),
                "Works on ML.",
            ),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert!(r.created);
    assert_eq!(r.path, s.root().join("user_role.md"));
    let f = s.read("user_role.md").await.unwrap();
    assert_eq!(
        f.raw,
        "---\nname: Role\ndescription: data scientist, new to Rust\ntype: user\n---\n\nWorks on ML.\n"
    );
    assert_eq!(f.body, "Works on ML.\n");
    assert_eq!(f.header.memory_type, Some(MemoryType::User));
    let idx = std::fs::read_to_string(s.root().join("MEMORY.md")).unwrap();
    assert_eq!(
        idx,
        "# My memory\n\nFree prose stays.\n- [Role](user_role.md) — data scientist, new to Rust\n"
    );

    // Append: body grows, index hook follows a new description.
    let r = s
        .write(
            "user_role.md",
            &doc(
                "",
                "data scientist, learning Rust",
                None,
                "Prefers examples.",
            ),
            WriteMode::Append,
        )
        .await
        .unwrap();
    assert!(!r.created);
    let f = s.read("user_role.md").await.unwrap();
    assert_eq!(f.body, "Works on ML.\n\nPrefers examples.\n");
    assert_eq!(f.header.name.as_deref(), Some("Role"));
    let entries = s.index_entries().await.unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].hook, "data scientist, learning Rust");

    // Nested path + rename.
    s.write(
        "project/freeze.md",
        &doc(
            "Freeze",
            "merge freeze from 2026-03-05",
            Some(MemoryType::Project),
            "b",
        ),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    s.rename("project/freeze.md", "project/release_freeze.md")
        .await
        .unwrap();
    let files: Vec<_> = s
        .index_entries()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file)
        .collect();
    assert_eq!(files, ["user_role.md", "project/release_freeze.md"]);
    assert!(matches!(
        s.read("project/freeze.md").await,
        Err(MemoryError::NotFound(_))
    ));

    // Delete removes the line and the file; prose untouched.
    s.delete("user_role.md").await.unwrap();
    assert!(matches!(
        s.delete("user_role.md").await,
        Err(MemoryError::NotFound(_))
    ));
    let idx = std::fs::read_to_string(s.root().join("MEMORY.md")).unwrap();
    assert_eq!(
        idx,
        "# My memory\n\nFree prose stays.\n- [Freeze](project/release_freeze.md) — merge freeze from 2026-03-05\n"
    );
    let scanned: Vec<_> = s
        .scan()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.rel_path)
        .collect();
    assert_eq!(scanned, ["project/release_freeze.md"]);
}

#[tokio::test]
async fn refused_writes_change_nothing() {
    let (_d, s) = store();
    let err = s
        .write(
            "creds.md",
            &doc("Creds", "db access", None, "password = hunter22"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("credential assignment") && !err.to_string().contains("hunter22")
    );
    for bad in [
        "../x.md",
        "/tmp/x.md",
        "a\0.md",
        ".hidden.md",
        "MEMORY.md",
        "x.txt",
    ] {
        assert!(
            s.write(bad, &doc("n", "d", None, "b"), WriteMode::Overwrite)
                .await
                .is_err(),
            "{bad:?}"
        );
    }
    #[cfg(unix)]
    {
        let outside = TempDir::new().unwrap();
        std::os::unix::fs::symlink(outside.path(), s.root().join("out")).unwrap();
        let err = s
            .write("out/x.md", &doc("n", "d", None, "b"), WriteMode::Overwrite)
            .await
            .unwrap_err();
        assert!(
            matches!(err, MemoryError::OutsideMemoryDir { .. }),
            "{err:?}"
        );
        assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
        std::fs::remove_file(s.root().join("out")).unwrap();
    }
    let left: Vec<_> = std::fs::read_dir(s.root())
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .filter(|n| n != ".memloop.lock")
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[tokio::test]
async fn hostile_reads() {
    let (_d, s) = store();
    std::fs::write(s.root().join("bin.md"), b"\x00\x01binary").unwrap();
    std::fs::write(s.root().join("latin.md"), b"caf\xe9").unwrap();
    std::fs::write(s.root().join("huge.md"), vec![b'a'; 2 * 1024 * 1024]).unwrap();
    let e = s.read("bin.md").await.unwrap_err();
    assert!(
        matches!(e, MemoryError::Unreadable { .. }) && e.to_string().contains("binary"),
        "{e}"
    );
    // Non-UTF-8: read lossily; over 1 MiB: read cut, with a note.
    assert_eq!(s.read("latin.md").await.unwrap().raw, "caf\u{fffd}");
    let huge = s.read("huge.md").await.unwrap().raw;
    assert!(huge.starts_with(&"a".repeat(1024 * 1024)) && huge.len() < 1024 * 1024 + 200);
    assert!(
        huge.contains("[memory cut: the file is 2097152 bytes"),
        "cut note"
    );
    // Appending to a non-UTF-8 file is refused instead of corrupting it.
    assert!(
        s.write("latin.md", &doc("", "", None, "more"), WriteMode::Append)
            .await
            .is_err()
    );
    assert_eq!(
        std::fs::read(s.root().join("latin.md")).unwrap(),
        b"caf\xe9"
    );
}

#[tokio::test]
async fn load_index_applies_caps() {
    let (_d, s) = store();
    assert_eq!(s.load_index().await.unwrap().content, "");
    let text: String = (0..300)
        .map(|i| format!("- [m{i}](m{i}.md) — hook {i}\n"))
        .collect();
    std::fs::write(s.root().join("MEMORY.md"), &text).unwrap();
    let l = s.load_index().await.unwrap();
    assert!(l.truncated_by_lines);
    assert_eq!(l.original_lines, 300);
    assert_eq!(
        s.index_entries().await.unwrap().len(),
        300,
        "entries are uncapped"
    );
}

#[tokio::test]
async fn tools_round_trip_through_the_store() {
    let (_d, s) = store();
    let s = Arc::new(s);
    let tools = memory_tools(s.clone());
    let (read, write) = (&tools[0], &tools[1]);
    assert_eq!(read.spec().name, MEMORY_READ);
    let input = json!({"topic": "feedback_testing", "content": "Use a real db.\n\n**Why:** mocks hid a bug.", "name": "Real db in tests", "description": "integration tests must hit a real database", "type": "feedback"});
    let targets = write.write_targets(&input, &tool_context()).unwrap();
    assert_eq!(targets, vec![s.root().join("feedback_testing.md")]);
    let out = write.call(input.clone(), &tool_context()).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(out.files_written, targets);
    let out = write
        .call(
            json!({"topic": "feedback_testing", "content": "Also for CI.", "mode": "append"}),
            &tool_context(),
        )
        .await;
    assert!(
        !out.is_error && out.content.starts_with("Updated"),
        "{}",
        out.content
    );

    let out = read
        .call(json!({"topic": "feedback_testing"}), &tool_context())
        .await;
    assert!(
        out.content.contains("type: feedback") && out.content.ends_with("Also for CI.\n"),
        "{}",
        out.content
    );
    let out = read.call(json!({"topic": "MEMORY"}), &tool_context()).await;
    assert_eq!(
        out.content,
        "- [Real db in tests](feedback_testing.md) — integration tests must hit a real database"
    );
    let out = read.call(json!({"topic": "_list"}), &tool_context()).await;
    assert!(
        out.content
            .starts_with("- [feedback] feedback_testing.md (")
            && out
                .content
                .ends_with("): integration tests must hit a real database")
    );

    // The store's gate as a WriteScopeGate allows the tool's targets.
    let gate = memloop_core::tool::WriteScopeGate::new(s.gate().as_contains_fn());
    let req = |input: serde_json::Value| ToolCallRequest {
        name: write.spec().name,
        effect: write.spec().effect,
        write_targets: write.write_targets(&input, &tool_context()),
        input,
    };
    assert_eq!(
        gate.check(&req(input), &tool_context()).await,
        PermissionDecision::Allow
    );
    assert!(matches!(
        gate.check(
            &req(json!({"topic": "../evil", "content": "x"})),
            &tool_context()
        )
        .await,
        PermissionDecision::Deny(_)
    ));
}

#[tokio::test]
async fn tool_errors_are_readable() {
    let (_d, s) = store();
    let tools = memory_tools(Arc::new(s));
    let (read, write) = (&tools[0], &tools[1]);
    let cases = [
        (json!({"topic": "../../etc/passwd", "content": "x"}), "`..`"),
        (
            json!({"topic": "/abs/path", "content": "x"}),
            "path separator",
        ),
        (json!({"topic": "a\u{0}b", "content": "x"}), "NUL"),
        (
            json!({"topic": ".bashrc", "content": "x"}),
            "starts with `.`",
        ),
        (json!({"topic": "MEMORY", "content": "x"}), "index"),
        (
            json!({"topic": "t", "content": "x", "mode": "replace"}),
            "unknown mode",
        ),
        (
            json!({"topic": "t", "content": "x", "type": "note"}),
            "unknown memory type",
        ),
        (
            json!({"topic": "t", "content": "api_key = AbC123xyz987"}),
            "secret",
        ),
        (json!({"content": "x"}), "missing field `topic`"),
    ];
    for (i, (input, needle)) in cases.into_iter().enumerate() {
        // Bad topics are caught before the call too, so a gate denies them.
        assert_eq!(
            write.write_targets(&input, &tool_context()).is_err(),
            i < 5 || i == 8,
            "{input}"
        );
        let out = write.call(input.clone(), &tool_context()).await;
        assert!(
            out.is_error && out.content.contains(needle),
            "{input}: {}",
            out.content
        );
        assert!(out.files_written.is_empty());
    }
    let out = read
        .call(json!({"topic": "nothing_here"}), &tool_context())
        .await;
    assert!(
        out.is_error && out.content.contains("no memory named"),
        "{}",
        out.content
    );
    assert_eq!(
        read.call(json!({"topic": "_list"}), &tool_context())
            .await
            .content,
        "No memories saved yet."
    );
}

#[tokio::test]
async fn memory_section_renders_guidance_and_capped_index() {
    let (_d, s) = store();
    let s = Arc::new(s);
    s.write(
        "user_role.md",
        &doc("Role", "backend dev", Some(MemoryType::User), "b"),
        WriteMode::Overwrite,
    )
    .await
    .unwrap();
    let text = MemorySection::new(s.clone()).compute().await.unwrap();
    assert!(text.contains(&s.root().display().to_string()));
    assert!(text.ends_with("- [Role](user_role.md) — backend dev\n"));
    for must in [
        "### user",
        "### feedback",
        "### project",
        "### reference",
        "What does not belong",
        "memory_write",
        "do not apply, cite, compare against or mention",
        "confirm it still exists",
        "**Why:**",
        "Never record negative judgements about the user",
        "explicitly asks you to remember something, save it right away",
        "a plan or a task list holds that; memory holds what outlives the task",
        "\"pipeline bugs are in the Linear project INGEST\"",
    ] {
        assert!(text.contains(must), "prompt lacks {must}");
    }
    assert!(!text.contains("{{"), "all placeholders substituted");
    assert_eq!(
        MemorySection::new(s.clone()).enabled(false).compute().await,
        None
    );
    let off = memloop_host::env::EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "TRUE")]);
    assert_eq!(
        MemorySection::from_env(s.clone(), &off).compute().await,
        None
    );
    let on = memloop_host::env::EnvVars::from_pairs([("MEMLOOP_DISABLE_AUTO_MEMORY", "0")]);
    assert!(MemorySection::from_env(s, &on).compute().await.is_some());
}

#[tokio::test]
async fn unnamed_new_memories_are_named_after_their_file() {
    let (_d, s) = store();
    s.write("topic_a.md", &doc("", "", None, "first"), WriteMode::Append)
        .await
        .unwrap();
    let f = s.read("topic_a.md").await.unwrap();
    assert_eq!(
        f.raw,
        "---\nname: topic_a\ndescription: \"\"\n---\n\nfirst\n"
    );
    assert_eq!(s.index_entries().await.unwrap()[0].title, "topic_a");
}

/// A checked raw write stores the file as written (unknown keys, comments, CRLF, no final
/// newline), indexes it from its frontmatter, honours `expected`, and refuses text that is not a
/// memory file, a credential in an unknown key, `MEMORY.md` and an oversized text.
#[tokio::test]
async fn raw_writes_keep_the_bytes_and_apply_every_rule() {
    use memloop_store::{ExpectedVersion, MemoryError, content_version};
    let dir = tempfile::tempdir().unwrap();
    let store = FileMemoryStore::open(dir.path()).unwrap();
    let text = "---\r\nname: 決定\r\ndescription: Решение\r\n# コメント\r\ntags: [배포]\r\nmetadata:\r\n  type: project\r\n---\r\n\r\n本文  \r\nno final newline";
    let w = store
        .write_raw_if("d.md", text, &ExpectedVersion::Absent)
        .await
        .unwrap();
    assert_eq!(w.version, content_version(text));
    assert_eq!(
        std::fs::read(dir.path().join("d.md")).unwrap(),
        text.as_bytes()
    );
    let index = std::fs::read_to_string(dir.path().join("MEMORY.md")).unwrap();
    assert!(
        index.contains("[決定](d.md)") && index.contains("Решение"),
        "{index}"
    );
    let err = store
        .write_raw_if("d.md", text, &ExpectedVersion::Absent)
        .await
        .unwrap_err();
    assert!(
        matches!(err, MemoryError::VersionConflict { .. }),
        "{err:?}"
    );

    let err = store
        .write_raw_if("plain.md", "no frontmatter 中文", &ExpectedVersion::Any)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("not a memory file"), "{err}");
    let secret = format!(
        "---\nname: x\ndescription: y\nmetadata:\n  key: AKIA{}\n---\n\nbody\n",
        "ABCDEFGH12345678"
    );
    let err = store
        .write_raw_if("s.md", &secret, &ExpectedVersion::Any)
        .await
        .unwrap_err();
    assert!(matches!(err, MemoryError::SensitiveData { .. }), "{err:?}");
    let err = store
        .write_raw_if("MEMORY.md", text, &ExpectedVersion::Any)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("MEMORY.md"), "{err}");
    let big = format!("{text}{}", "я".repeat(600_000));
    let err = store
        .write_raw_if("big.md", &big, &ExpectedVersion::Any)
        .await
        .unwrap_err();
    assert!(matches!(err, MemoryError::TooLarge { .. }), "{err:?}");
    for gone in ["plain.md", "s.md", "big.md"] {
        assert!(!dir.path().join(gone).exists(), "{gone}");
    }
}

/// A read answers the same whether it runs on the calling task (a small memory in a watched
/// dir) or on the blocking pool (a large memory, or a dir that is not watched): content,
/// header, the size cut, binary and invalid UTF-8 files, a missing file and an escaping path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_are_the_same_on_the_calling_task_and_on_the_blocking_pool() {
    use memloop_files::StoreConfig;
    let dir = TempDir::new().unwrap();
    let root = dir.path();
    let front =
        |name: &str| format!("---\nname: {name}\ndescription: {name}\ntype: project\n---\n\n");
    std::fs::write(root.join("小.md"), front("部署") + "周二发布。\n").unwrap();
    // Past the inline bound (64 KiB): read on the blocking pool even when watched.
    let big = front("큰 메모") + &"배포 절차를 지킨다. ".repeat(4_000);
    assert!(big.len() > 64 * 1024);
    std::fs::write(root.join("큰.md"), &big).unwrap();
    // Cut by a small `max_read_bytes` in the middle of a character.
    std::fs::write(root.join("длинный.md"), front("Длинный") + &"ж".repeat(600)).unwrap();
    std::fs::write(root.join("bin.md"), b"---\nname: x\n---\n\0\x01").unwrap();
    std::fs::write(
        root.join("latin.md"),
        b"---\nname: caf\xe9\n---\n\nd\xe9j\xe0 vu\n",
    )
    .unwrap();
    let config = StoreConfig {
        max_read_bytes: 1_000,
        ..StoreConfig::default()
    };
    let watched: Arc<dyn MemoryStore> =
        Arc::new(FileMemoryStore::open(root).unwrap().with_config(config));
    // The first feed call starts the watcher: from then on small reads stay on the task.
    watched.changes(None).await.unwrap();
    let polled: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(root).unwrap().with_config(
        StoreConfig {
            watch: false,
            ..config
        },
    ));
    for name in [
        "小.md",
        "큰.md",
        "длинный.md",
        "bin.md",
        "latin.md",
        "нет.md",
        "../小.md",
    ] {
        let inline = watched.read(name).await;
        let pooled = polled.read(name).await;
        assert_eq!(format!("{inline:?}"), format!("{pooled:?}"), "{name}");
    }
    let small = watched.read("小.md").await.unwrap();
    assert_eq!(small.header.name.as_deref(), Some("部署"));
    assert_eq!(small.body.trim(), "周二发布。");
    assert!(
        watched
            .read("длинный.md")
            .await
            .unwrap()
            .raw
            .contains("memory cut")
    );
    assert!(watched.read("bin.md").await.is_err());
    assert!(matches!(
        watched.read("нет.md").await,
        Err(MemoryError::NotFound(_))
    ));
}

/// Each kind of memory carries the original's four parts (when to save, how to use, body
/// structure, examples); the index rule (200 lines, by topic not date) and the exclusions that
/// hold even on request are stated; and the guidance is whole whatever language the index is in.
#[tokio::test]
async fn memory_guidance_has_every_part_of_each_kind() {
    for (title, description) in [
        ("Role", "backend dev"),
        ("角色", "后端开发,熟悉 Go"),
        ("Rôle", "développeuse back-end"),
    ] {
        let (_d, s) = store();
        let s = Arc::new(s);
        s.write(
            "user_role.md",
            &doc(title, description, Some(MemoryType::User), "b"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
        let text = MemorySection::new(s).compute().await.unwrap();
        assert!(text.ends_with(&format!("- [{title}](user_role.md) — {description}\n")));
        for kind in ["user", "feedback", "project", "reference"] {
            let start = text.find(&format!("### {kind}\n")).expect(kind);
            let rest = &text[start + 4..];
            let part = &rest[..rest.find("\n#").unwrap_or(rest.len())];
            for must in ["- When to save:", "- How to use:", "- Body:", "- Examples:"] {
                assert!(part.contains(must), "{kind} lacks {must}");
            }
        }
        for must in [
            "lines past 200 are cut",
            "organise memories by topic, not by date",
            "hold even when the user asks you to save such things: then ask what in the request is worth\nkeeping",
            "do not apply, cite, compare against or mention any memory",
        ] {
            assert!(text.contains(must), "prompt lacks {must}");
        }
    }
}
