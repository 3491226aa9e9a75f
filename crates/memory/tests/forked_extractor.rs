//! The default forked extractor against a real FileMemoryStore in a tempdir, driven by a
//! ScriptedModel: hostile writes are denied, real memories are saved, events are reported.
#![allow(clippy::unwrap_used, clippy::expect_used)]
// test helpers outside #[test] fns
// Some tests need Unix (symlinks, socket pairs) and are compiled out elsewhere, with their helpers.
#![cfg_attr(not(unix), allow(dead_code, unused_imports))]

mod extract_common;
use extract_common as common;
use memloop_memory::MemoryEvent;

use common::run_extractor;
use memloop_core::Hook;
use memloop_core::{
    Agent, AgentConfig,
    events::{AgentEvent, VecSink},
    message::ContentBlock,
};
use memloop_files::FileMemoryStore;
use memloop_memory::extract::{EXTRACTOR_PURPOSE, ExtractionScheduler, Extractor, ForkedExtractor};
use memloop_store::{MemoryDoc, MemoryError, MemoryPath, MemoryStore, MemoryType, WriteMode};
use memloop_testkit::{Forwarding, Method, ScriptStep, ScriptedModel};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn listing(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[cfg(unix)]
#[tokio::test]
async fn every_escape_attempt_is_denied_and_nothing_is_written_outside() {
    let tmp = tempfile::tempdir().unwrap();
    let (mem, outside) = (tmp.path().join("mem"), tmp.path().join("outside"));
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("victim.md"), "original").unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(&mem).unwrap());
    std::os::unix::fs::symlink(&outside, mem.join("link")).unwrap();

    let model = Arc::new(ScriptedModel::new());
    let abs_outside = outside.join("y.md").display().to_string();
    model.push_for(
        EXTRACTOR_PURPOSE,
        ScriptStep::tools(vec![
            (
                "write_file".into(),
                json!({"path": "../x.md", "content": "a"}),
            ),
            (
                "write_file".into(),
                json!({"path": abs_outside, "content": "b"}),
            ),
            (
                "write_file".into(),
                json!({"path": "link/escape.md", "content": "c"}),
            ),
            (
                "edit_file".into(),
                json!({"path": "link/victim.md", "old_string": "original", "new_string": "pwned"}),
            ),
            ("shell".into(), json!({"command": "echo pwned > z.md"})),
            ("shell".into(), json!({"command": "touch inside.md"})),
            (
                "memory_write".into(),
                json!({"topic": "../x", "content": "d"}),
            ),
        ]),
    );
    model.push_for(EXTRACTOR_PURPOSE, ScriptStep::text("nothing to save"));

    let (written, events) =
        run_extractor(&ForkedExtractor::new(store.clone()), model.clone()).await;
    assert!(written.is_empty());

    let denied: Vec<String> = events
        .events()
        .into_iter()
        .filter_map(|e| match e {
            AgentEvent::ToolDenied { name, .. } => Some(name),
            _ => None,
        })
        .collect();
    // The extractor declares the parent's tools (a coding agent's), and its gate denies the
    // generic file writes, the shell writes and the escaping memory_write.
    assert_eq!(
        denied,
        [
            "write_file",
            "write_file",
            "write_file",
            "edit_file",
            "shell",
            "shell",
            "memory_write"
        ]
    );
    // The model reads why: every result in the second request is an error saying so.
    let second = &model.requests_for(EXTRACTOR_PURPOSE)[1];
    let results = second.messages.last().unwrap();
    let mut texts = Vec::new();
    for b in &results.content {
        if let ContentBlock::ToolResult {
            content, is_error, ..
        } = b
        {
            assert!(is_error);
            texts.push(content.text());
        }
    }
    assert_eq!(texts.len(), 7);
    assert!(
        texts[0].contains("write_file is not available to this background memory writer"),
        "{}",
        texts[0]
    );
    assert!(texts[4].contains("read-only"), "{}", texts[4]);

    assert_eq!(listing(tmp.path()), ["mem", "outside"]);
    assert_eq!(listing(&outside), ["victim.md"]);
    assert_eq!(
        std::fs::read_to_string(outside.join("victim.md")).unwrap(),
        "original"
    );
    let mem_files: Vec<String> = listing(&mem)
        .into_iter()
        .filter(|f| f != ".memloop.lock")
        .collect();
    assert_eq!(
        mem_files,
        ["link"],
        "only the symlink (and the store's lock file)"
    );
}

#[tokio::test]
async fn read_only_tools_run_and_contained_writes_land() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());
    let model = Arc::new(ScriptedModel::new());
    model.push_for(
        EXTRACTOR_PURPOSE,
        ScriptStep::tools(vec![
            ("shell".into(), json!({"command": "ls"})),
            ("glob".into(), json!({"pattern": "**/*.md"})),
        ]),
    );
    model.push_for(
        EXTRACTOR_PURPOSE,
        ScriptStep::tool(
            "memory_write",
            json!({"topic": "project_deadline", "name": "Deadline", "type": "project",
                   "description": "release freeze on 2026-12-01", "content": "Freeze.\n"}),
        ),
    );
    model.push_for(EXTRACTOR_PURPOSE, ScriptStep::text("saved"));
    let (written, events) =
        run_extractor(&ForkedExtractor::new(store.clone()), model.clone()).await;
    // The memory path, relative to the store (not the file in the dir).
    assert_eq!(
        written,
        vec![MemoryPath::new("project_deadline.md").unwrap()]
    );
    assert!(
        events
            .events()
            .iter()
            .all(|e| !matches!(e, AgentEvent::ToolDenied { .. }))
    );
    let headers = store.scan().await.unwrap();
    assert_eq!(headers[0].memory_type, Some(MemoryType::Project));
}

/// The wiring a host uses (also the README snippet): the scheduler as a stop hook, a scripted
/// extractor that saves a preference, the event, and the index the next session sees.
#[tokio::test]
async fn agent_stop_hook_saves_a_memory_and_reports_it() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());
    let old = MemoryDoc {
        name: "Role".into(),
        description: "the user is a backend engineer".into(),
        memory_type: Some(MemoryType::User),
        body: "Backend engineer.\n".into(),
    };
    store
        .write("user_role.md", &old, WriteMode::Overwrite)
        .await
        .unwrap();

    let model = ScriptedModel::new()
        .then(ScriptStep::text("Got it: tabs, not spaces."))
        .on_purpose(EXTRACTOR_PURPOSE, |req| {
            // First extractor call: save the preference; second: done.
            let wrote = req
                .messages
                .last()
                .is_some_and(|m| m.tool_result_ids().next().is_some());
            Some(if wrote {
                ScriptStep::text("saved")
            } else {
                ScriptStep::tool(
                    "memory_write",
                    json!({"topic": "feedback_indentation", "type": "feedback",
                           "name": "Indentation",
                           "description": "the user wants tabs, never spaces",
                           "content": "Use tabs.\n**Why:** team style.\n**How to apply:** every file."}),
                )
            })
        });
    let model = Arc::new(model);
    let events = VecSink::default();
    let scheduler = Arc::new(ExtractionScheduler::new(
        store.clone(),
        Arc::new(ForkedExtractor::new(store.clone())),
    ));
    let config = AgentConfig {
        session_id: "demo".into(),
        ..AgentConfig::default()
    };
    let mut agent = Agent::builder(model.clone())
        .config(config)
        .events(Arc::new(events.clone()))
        .hook(scheduler.clone())
        .build();
    agent.run_turn("I prefer tabs over spaces").await.unwrap();
    assert!(agent.drain(Duration::from_secs(60)).await.completed);

    assert!(
        events
            .events()
            .contains(&AgentEvent::from(MemoryEvent::MemoriesSaved {
                paths: vec!["feedback_indentation.md".into()]
            }))
    );
    let prompt = model.requests_for(EXTRACTOR_PURPOSE)[0]
        .messages
        .last()
        .unwrap()
        .text();
    assert!(
        prompt.contains("user_role.md"),
        "manifest of existing memories in the prompt"
    );
    assert!(prompt.contains("last 2 messages"), "{prompt}");
    let index = store.load_index().await.unwrap().content;
    assert!(index.contains("(feedback_indentation.md)"), "{index}");
    let last = agent.messages().last().unwrap().id.clone();
    assert_eq!(scheduler.cursor("demo"), Some(last));
}

/// A background writer that tries to store a credential, to overwrite MEMORY.md directly (with
/// the generic file tools and through the memory tool), and to save three memories: no
/// credential reaches the disk, the hand-written index keeps every byte, and exactly three new
/// index lines appear.
#[tokio::test]
async fn hostile_extractor_writes_only_through_the_store() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());
    let index = "# My memories\n\nHand-written prose stays.\n";
    std::fs::write(tmp.path().join("MEMORY.md"), index).unwrap();
    let mem = |topic: &str, content: &str| {
        (
            "memory_write".to_owned(),
            json!({"topic": topic, "type": "project", "name": topic,
                   "description": format!("about {topic}"), "content": content}),
        )
    };
    let model = Arc::new(ScriptedModel::new());
    model.push_for(
        EXTRACTOR_PURPOSE,
        ScriptStep::tools(vec![
            mem(
                "project_db",
                "The staging db is postgres://admin:S3cretPass@db/x",
            ),
            mem("user_wifi", "wifi password: letmein"),
            (
                "write_file".into(),
                json!({"path": "creds.md", "content": "token=abc"}),
            ),
            (
                "write_file".into(),
                json!({"path": "MEMORY.md", "content": "- [pwned](x.md)\n"}),
            ),
            (
                "edit_file".into(),
                json!({"path": "MEMORY.md", "old_string": "prose", "new_string": "pwned"}),
            ),
            mem("MEMORY", "- [pwned](x.md)"),
            ("shell".into(), json!({"command": "echo x > MEMORY.md"})),
            mem("project_a", "Fact A."),
            mem("project_b", "Fact B."),
            mem("project_c", "Fact C."),
        ]),
    );
    model.push_for(EXTRACTOR_PURPOSE, ScriptStep::text("done"));
    let (written, _events) =
        run_extractor(&ForkedExtractor::new(store.clone()), model.clone()).await;
    assert_eq!(written.len(), 3, "{written:?}");

    // No credential anywhere on disk.
    for entry in std::fs::read_dir(tmp.path()).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default();
        for secret in ["S3cretPass", "letmein", "token=abc", "pwned"] {
            assert!(!text.contains(secret), "{secret} reached the disk");
        }
    }
    assert!(!tmp.path().join("creds.md").exists());
    // The index: the hand-written bytes, then exactly three new lines.
    let after = std::fs::read_to_string(tmp.path().join("MEMORY.md")).unwrap();
    let added = after.strip_prefix(index).expect("hand-written index kept");
    let lines: Vec<&str> = added.lines().collect();
    assert_eq!(
        lines,
        [
            "- [project_a](project_a.md) — about project_a",
            "- [project_b](project_b.md) — about project_b",
            "- [project_c](project_c.md) — about project_c",
        ]
    );
}

/// A memory dir on a read-only filesystem: reads work, every write fails with an I/O error.
/// (Tests run as root, where a 0555 dir is still writable, so the failure is injected at the
/// store boundary, with the real store underneath for reads.)
fn read_only_dir(dir: &std::path::Path) -> Arc<dyn MemoryStore> {
    let store = Forwarding::new(FileMemoryStore::open(dir).unwrap());
    store.fail(Method::WRITES, |call| {
        MemoryError::io(
            format!("writing {}", call.paths.join(", ")),
            std::io::Error::from(std::io::ErrorKind::ReadOnlyFilesystem),
        )
    });
    Arc::new(store)
}

/// An extraction whose every write failed is a failed extraction: the cursor stays, so the same
/// messages are offered again once the dir is writable. A run that only had a credential refused
/// is not a failure (the refusal is the store doing its job).
#[tokio::test]
async fn an_extraction_whose_writes_all_failed_keeps_the_cursor() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = read_only_dir(tmp.path());
    let model = Arc::new(ScriptedModel::new().on_purpose(EXTRACTOR_PURPOSE, |req| {
        let after_tool = req
            .messages
            .last()
            .is_some_and(|m| m.tool_result_ids().next().is_some());
        Some(if after_tool {
            ScriptStep::text("done")
        } else {
            ScriptStep::tool(
                "memory_write",
                json!({"topic": "project_a", "content": "Fact A.", "description": "a"}),
            )
        })
    }));
    let extractor = Arc::new(ForkedExtractor::new(store.clone()));
    let scheduler = ExtractionScheduler::new(store.clone(), extractor);
    let (events, bg) = (VecSink::default(), memloop_core::BackgroundTasks::new());
    scheduler
        .on_stop(common::hook_with_model(
            1,
            common::conversation(1),
            &events,
            &bg,
            model.clone(),
        ))
        .await;
    assert!(scheduler.drain(Duration::from_secs(60)).await.completed);
    assert_eq!(scheduler.cursor("s1"), None, "cursor must not advance");
    assert!(events.events().iter().any(|e| matches!(
        e.extension(),
        Some(MemoryEvent::ExtractionFailed { error }) if error.contains("memory write(s) failed")
    )));

    // Same scheduler shape over a writable store, where the only write is a refused credential:
    // that run succeeded (nothing to save) and advances the cursor.
    let ok_dir = tempfile::tempdir().unwrap();
    let ok_store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(ok_dir.path()).unwrap());
    let model = Arc::new(ScriptedModel::new().on_purpose(EXTRACTOR_PURPOSE, |req| {
        let after_tool = req
            .messages
            .last()
            .is_some_and(|m| m.tool_result_ids().next().is_some());
        Some(if after_tool {
            ScriptStep::text("done")
        } else {
            ScriptStep::tool(
                "memory_write",
                json!({"topic": "wifi", "content": "wifi password: letmein"}),
            )
        })
    }));
    let scheduler = ExtractionScheduler::new(
        ok_store.clone(),
        Arc::new(ForkedExtractor::new(ok_store.clone())),
    );
    scheduler
        .on_stop(common::hook_with_model(
            1,
            common::conversation(1),
            &events,
            &bg,
            model,
        ))
        .await;
    assert!(scheduler.drain(Duration::from_secs(60)).await.completed);
    assert_eq!(scheduler.cursor("s1").unwrap().as_str(), "a1");
}

/// The extractor declares the parent's tools unchanged: with the memory tools on the parent (as
/// `MemorySetup` wires them), its tool list, system prompt and message prefix are the parent's;
/// its own `memory_write` (bound to a tallying store under the same declaration) still reports
/// a run whose every write failed. Without them on the parent, they are added.
#[tokio::test]
async fn the_extractor_declares_the_parents_tools_and_still_tallies_its_writes() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = read_only_dir(tmp.path());
    let model = Arc::new(ScriptedModel::new().on_purpose(EXTRACTOR_PURPOSE, |req| {
        let after_tool = req
            .messages
            .last()
            .is_some_and(|m| m.tool_result_ids().next().is_some());
        Some(if after_tool {
            ScriptStep::text("done")
        } else {
            ScriptStep::tool(
                "memory_write",
                json!({"topic": "project_a", "content": "Fact A.", "description": "a"}),
            )
        })
    }));
    let (events, bg) = (VecSink::default(), memloop_core::BackgroundTasks::new());
    let mut hook = common::hook_with_model(1, common::conversation(1), &events, &bg, model.clone());
    // The parent's memory tools write into a different (writable) dir: the fork's own binding
    // is what runs.
    let other = tempfile::tempdir().unwrap();
    let other_store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(other.path()).unwrap());
    for tool in memloop_memory::tools::memory_tools(other_store) {
        hook.tools.register(tool);
    }
    let ctx = memloop_memory::extract::ExtractionContext {
        hook: hook.clone(),
        new_messages: common::conversation(1),
        trailing: false,
    };
    let err = ForkedExtractor::new(store.clone())
        .extract(&ctx)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("memory write(s) failed"), "{err}");
    assert!(!other.path().join("project_a.md").exists());
    let sent = model.requests_for(EXTRACTOR_PURPOSE);
    for req in &sent {
        assert_eq!(req.tools, hook.tools.specs());
        assert_eq!(req.system, *hook.system);
        assert_eq!(req.messages[..2], hook.messages[..]);
    }

    // A parent without the memory tools: the fork adds them (and misses the parent's cache).
    let model = Arc::new(ScriptedModel::new().then(ScriptStep::text("nothing to save")));
    let (written, _) = common::run_extractor(&ForkedExtractor::new(store), model.clone()).await;
    assert!(written.is_empty());
    let names: Vec<String> = model.requests()[0]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect();
    let mut expected = common::coding_tools().names();
    expected.extend(["memory_read".to_owned(), "memory_write".to_owned()]);
    expected.sort();
    assert_eq!(names, expected);
}

/// A store with no directory (a map in memory): the extractor reports the memories it wrote
/// as memory paths relative to the store (`project_deploys.md`), names in other scripts too,
/// a repeat once; never a file path, never the index.
#[tokio::test]
async fn a_store_without_a_directory_gets_memory_paths_back() {
    let store: Arc<dyn MemoryStore> = Arc::new(memloop_testkit::MapStore::new());
    assert!(store.describe().dir().is_none());
    let model = Arc::new(ScriptedModel::new());
    let write = |topic: &str, description: &str| {
        (
            "memory_write".to_owned(),
            json!({"topic": topic, "type": "project", "description": description,
                   "content": format!("{description}.\n")}),
        )
    };
    model.push_for(
        EXTRACTOR_PURPOSE,
        ScriptStep::tools(vec![
            write("project_deploys", "deploys happen on Tuesdays"),
            write("部署", "部署在周二进行"),
            write("развёртывание", "выкладка по вторникам"),
            write(
                "project_deploys",
                "deploys happen on Tuesdays, after the freeze",
            ),
        ]),
    );
    model.push_for(EXTRACTOR_PURPOSE, ScriptStep::text("saved"));
    let (written, _events) = run_extractor(&ForkedExtractor::new(store.clone()), model).await;
    let written: Vec<&str> = written.iter().map(|p| p.as_str()).collect();
    assert_eq!(
        written,
        vec!["project_deploys.md", "部署.md", "развёртывание.md"]
    );
    // Each is a memory of the store, read back by that path.
    for path in written {
        assert!(!std::path::Path::new(path).is_absolute(), "{path}");
        store.read(path).await.unwrap();
    }
}
