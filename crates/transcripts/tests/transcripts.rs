//! Transcripts: the writer hook on a real agent (scripted model), crash-safe reading, resuming,
//! clearing, the bounded search and its tool, retention.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_core::{
    Agent, AgentConfig,
    message::Message,
    tool::{AgentKind, Tool, ToolContext},
};
use memloop_testkit::{Echo, ScriptStep, ScriptedModel};
use memloop_transcripts::{
    RecordKind, SearchOptions, TranscriptDir, TranscriptHook, TranscriptSearchTool,
};
use std::io::Write;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

fn config(session: &str) -> AgentConfig {
    AgentConfig {
        session_id: session.into(),
        ..AgentConfig::default()
    }
}

fn agent(dir: &TranscriptDir, session: &str, model: ScriptedModel, history: Vec<Message>) -> Agent {
    Agent::builder(Arc::new(model))
        .config(config(session))
        .tool(Arc::new(Echo))
        .hook(Arc::new(TranscriptHook::new(dir.clone())))
        .messages(history)
        .build()
}

fn ids(messages: &[Message]) -> Vec<String> {
    messages.iter().map(|m| m.id.to_string()).collect()
}

#[tokio::test]
async fn every_message_is_one_line_in_order_with_tool_results() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path().join("projects").join("-repo"));
    let model = ScriptedModel::new()
        .then(ScriptStep::tool(
            "echo",
            serde_json::json!({"x": "grafana-42"}),
        ))
        .then(ScriptStep::text("done with the tool"))
        .then(ScriptStep::text("second answer"));
    let mut agent = agent(&dir, "s1", model, Vec::new());
    agent.run_turn("first question").await.unwrap();
    agent.run_turn("second question").await.unwrap();

    let path = dir.path_of("s1").unwrap();
    assert_eq!(path, tmp.path().join("projects/-repo/s1.jsonl"));
    let text = std::fs::read_to_string(&path).unwrap();
    // user, assistant(tool use), tool results, assistant, user, assistant
    assert_eq!(text.lines().count(), 6, "{text}");
    let t = dir.load("s1").unwrap();
    assert_eq!(t.skipped_lines, 0);
    assert_eq!(ids(&t.conversation()), ids(agent.messages()));
    assert_eq!(t.conversation(), agent.messages().to_vec());
    assert!(t.records.iter().all(|r| r.session_id == "s1"));
    assert_eq!(t.records[0].kind, RecordKind::User);
    assert!(
        t.records[2].text().contains("grafana-42"),
        "tool result recorded"
    );
}

#[test]
fn a_torn_last_line_is_skipped_and_the_rest_reads() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    let m1 = Message::user("hello there");
    let m2 = Message::assistant("hi");
    dir.append(
        "s",
        &[
            memloop_transcripts::TranscriptRecord::for_message("s", &m1).unwrap(),
            memloop_transcripts::TranscriptRecord::for_message("s", &m2).unwrap(),
        ],
    )
    .unwrap();
    // A crash in the middle of the next write.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(dir.path_of("s").unwrap())
        .unwrap();
    f.write_all(br#"{"type":"user","sessionId":"s","message":{"id":"x","ro"#)
        .unwrap();
    let t = dir.load("s").unwrap();
    assert_eq!(t.skipped_lines, 1);
    assert_eq!(t.conversation(), vec![m1, m2]);
}

#[tokio::test]
async fn a_resumed_session_appends_only_new_messages() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    let mut first = agent(
        &dir,
        "s",
        ScriptedModel::new().then(ScriptStep::text("one")),
        Vec::new(),
    );
    first.run_turn("turn one").await.unwrap();
    drop(first);

    let history = dir.load("s").unwrap().conversation();
    assert_eq!(history.len(), 2);
    let mut resumed = agent(
        &dir,
        "s",
        ScriptedModel::new().then(ScriptStep::text("two")),
        history,
    );
    resumed.run_turn("turn two").await.unwrap();
    let t = dir.load("s").unwrap();
    assert_eq!(t.records.len(), 4, "no message written twice, no reset");
    assert_eq!(t.conversation(), resumed.messages().to_vec());

    // Another conversation under the same id: a reset line, then all of it.
    let mut other = agent(
        &dir,
        "s",
        ScriptedModel::new().then(ScriptStep::text("three")),
        vec![Message::user("unrelated"), Message::assistant("ok")],
    );
    other.run_turn("turn three").await.unwrap();
    let t = dir.load("s").unwrap();
    assert_eq!(t.records[4].kind, RecordKind::Reset);
    assert_eq!(t.conversation(), other.messages().to_vec());
}

#[tokio::test]
async fn clear_starts_a_new_conversation_in_the_transcript() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    let model = ScriptedModel::new()
        .then(ScriptStep::text("one"))
        .then(ScriptStep::text("two"));
    let mut agent = agent(&dir, "s", model, Vec::new());
    agent.run_turn("before clear").await.unwrap();
    agent.clear().await;
    agent.run_turn("after clear").await.unwrap();
    let t = dir.load("s").unwrap();
    assert_eq!(t.records[2].kind, RecordKind::Reset);
    assert_eq!(t.records[2].reason.as_deref(), Some("clear"));
    assert_eq!(t.conversation(), agent.messages().to_vec());
    assert_eq!(t.message_records().len(), 4, "the old conversation is kept");
}

fn write_session(dir: &TranscriptDir, id: &str, texts: &[&str]) {
    let records: Vec<_> = texts
        .iter()
        .map(|t| {
            memloop_transcripts::TranscriptRecord::for_message(id, &Message::user(*t)).unwrap()
        })
        .collect();
    dir.append(id, &records).unwrap();
}

#[test]
fn search_needs_every_term_is_bounded_and_skips_the_current_session() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    write_session(
        &dir,
        "old",
        &[
            "the deploy failed with ERR_CONN_RESET on staging",
            "deploy went fine",
            "ERR_CONN_RESET again on deploy",
        ],
    );
    write_session(&dir, "current", &["deploy ERR_CONN_RESET"]);
    let opts = SearchOptions {
        exclude_session: Some("current".into()),
        ..SearchOptions::default()
    };
    let hits = dir.search("err_conn_reset DEPLOY", &opts).unwrap();
    assert_eq!(hits.len(), 2, "{hits:?}");
    assert!(hits.iter().all(|h| h.session_id == "old"));
    assert!(hits[0].snippet.contains("ERR_CONN_RESET on staging"));
    let both = dir.search("deploy staging", &opts).unwrap();
    assert_eq!(both.len(), 1, "every term must appear: {both:?}");
    let one = dir
        .search(
            "deploy",
            &SearchOptions {
                limit: 1,
                ..opts.clone()
            },
        )
        .unwrap();
    assert_eq!(one.len(), 1);
    assert!(dir.search("   ", &opts).unwrap().is_empty());
    // Only the newest part of a big transcript is read (here: the last line and a bit).
    let text = std::fs::read_to_string(dir.path_of("old").unwrap()).unwrap();
    let last = text.lines().last().unwrap().len() as u64;
    let small = SearchOptions {
        max_bytes_per_session: last + 20,
        ..opts
    };
    let tail = dir.search("deploy", &small).unwrap();
    assert_eq!(tail.len(), 1);
    assert!(tail[0].snippet.contains("again"));
}

#[tokio::test]
async fn the_tool_searches_past_sessions_only() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    write_session(&dir, "past", &["we chose pgbouncer in transaction mode"]);
    write_session(&dir, "now", &["pgbouncer question"]);
    let tool = TranscriptSearchTool::new(dir);
    let ctx = ToolContext {
        session_id: "now".into(),
        cwd: tmp.path().into(),
        agent: AgentKind::Main,
        cancel: Default::default(),
    };
    let out = tool
        .call(serde_json::json!({"query": "pgbouncer"}), &ctx)
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("[session past"), "{}", out.content);
    assert!(!out.content.contains("session now"));
    let none = tool
        .call(serde_json::json!({"query": "kubernetes"}), &ctx)
        .await;
    assert!(none.content.contains("No past session"));
    assert!(tool.call(serde_json::json!({}), &ctx).await.is_error);
}

#[test]
fn retention_deletes_old_transcripts_but_not_the_current_one() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    for id in ["old", "fresh", "current"] {
        write_session(&dir, id, &["x"]);
    }
    let now = SystemTime::now();
    let long_ago = now - Duration::from_secs(40 * 24 * 3600);
    for id in ["old", "current"] {
        std::fs::File::options()
            .write(true)
            .open(dir.path_of(id).unwrap())
            .unwrap()
            .set_modified(long_ago)
            .unwrap();
    }
    std::fs::create_dir(tmp.path().join("memory")).unwrap();
    let deleted = dir
        .prune(Duration::from_secs(30 * 24 * 3600), now, "current")
        .unwrap();
    assert_eq!(deleted, vec!["old".to_owned()]);
    let left: Vec<_> = dir.list().unwrap().into_iter().map(|s| s.id).collect();
    assert_eq!(left.len(), 2);
    assert!(left.contains(&"current".to_owned()) && left.contains(&"fresh".to_owned()));
    assert!(tmp.path().join("memory").is_dir());
}

#[test]
fn session_ids_cannot_name_other_files() {
    let dir = TranscriptDir::new("/tmp/x");
    for bad in ["", "../a", "a/b", ".hidden"] {
        assert!(dir.path_of(bad).is_err(), "{bad}");
    }
}

/// Attaches a reminder that is ready at once, so it lands on the user's message before the first
/// model call.
struct InstantAttachment;

#[async_trait::async_trait]
impl memloop_core::Hook for InstantAttachment {
    async fn on_turn_start(
        &self,
        _ctx: &memloop_core::HookContext,
        _user_text: &str,
    ) -> Option<memloop_core::hooks::PendingAttachment> {
        Some(memloop_core::hooks::PendingAttachment::spawn(
            Default::default(),
            async {
                Some(memloop_core::hooks::Attachment {
                    kind: "test".into(),
                    text: "attached reminder".into(),
                })
            },
        ))
    }
}

#[tokio::test]
async fn the_user_message_is_written_with_the_attachments_that_landed_on_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    let mut agent = Agent::builder(Arc::new(
        ScriptedModel::new().then(ScriptStep::text("answer")),
    ))
    .config(config("s"))
    .hook(Arc::new(TranscriptHook::new(dir.clone())))
    .hook(Arc::new(InstantAttachment))
    .build();
    agent.run_turn("question").await.unwrap();
    assert!(agent.messages()[0].text().contains("attached reminder"));
    assert_eq!(
        dir.load("s").unwrap().conversation(),
        agent.messages().to_vec()
    );
}

#[test]
fn search_works_in_every_language() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    write_session(
        &dir,
        "old",
        &[
            "我们决定把主数据库迁移到PostgreSQL，下周三完成",
            "デプロイは金曜日に延期しました",
            "Мы перенесли базы данных на новый сервер",
            "캐시는 Redis로 바꾸기로 했다",
            "ＡＰＩキーの更新は来月",
            "unrelated English line about lunch",
        ],
    );
    let opts = SearchOptions::default();
    let first = |q: &str| {
        let hits = dir.search(q, &opts).unwrap();
        assert_eq!(hits.len(), 1, "{q}: {hits:?}");
        hits[0].snippet.clone()
    };
    // A query mixing scripts with no spaces, its words in another order than in the message.
    assert!(first("PostgreSQL数据库").contains("主数据库"));
    assert!(first("金曜日デプロイ").contains("デプロイ"));
    // Another inflection of the same Russian words.
    assert!(first("база данных").contains("базы данных"));
    // A Korean particle does not hide its noun.
    assert!(first("캐시").contains("Redis"));
    // Full-width Latin in the message, ASCII in the query.
    assert!(first("api キー").contains("api"));
    // A term missing from every message finds nothing.
    assert!(dir.search("数据库 Oracle", &opts).unwrap().is_empty());
}

#[test]
fn search_stems_latin_words_in_the_message_language() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    write_session(
        &dir,
        "old",
        &[
            "Las migraciones de la base de datos se ejecutan antes de cada despliegue",
            "Die Datenbanken werden jede Nacht gesichert und dreißig Tage aufbewahrt",
            "Le chiavi di cifratura vengono ruotate e i certificati scaduti rinnovati",
            "the tomato plants will die without water over the holidays",
        ],
    );
    let opts = SearchOptions::default();
    let first = |q: &str| {
        let hits = dir.search(q, &opts).unwrap();
        assert_eq!(hits.len(), 1, "{q}: {hits:?}");
        hits[0].snippet.clone()
    };
    // Other inflections, and the query's function words (stop words of the message's
    // language) are not required.
    assert!(first("se ejecutó la migración").contains("migraciones"));
    assert!(first("eine Datenbank").contains("Datenbanken"));
    assert!(first("il certificato rinnovato").contains("certificati"));
    // German "die" is an article, English "die" a word the English message must contain.
    assert!(first("plants die").contains("tomato"));
    assert!(
        dir.search("Datenbanken die Woche", &opts)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn a_malformed_line_in_the_middle_is_skipped_and_counted() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    let m1 = Message::user("第一条消息");
    let m2 = Message::assistant("второе сообщение");
    let rec = |m: &Message| {
        let line = serde_json::to_string(
            &memloop_transcripts::TranscriptRecord::for_message("s", m).unwrap(),
        )
        .unwrap();
        line.into_bytes()
    };
    let mut bytes = rec(&m1);
    bytes.extend_from_slice(b"\nnot json at all\n");
    // A record that is not UTF-8 (a foreign tool wrote Latin-1 into the file): read lossily.
    let latin1: Vec<u8> = String::from_utf8(rec(&Message::user("café")))
        .unwrap()
        .replace('é', "\u{1}")
        .into_bytes()
        .into_iter()
        .map(|b| if b == 1 { 0xE9 } else { b })
        .collect();
    bytes.extend_from_slice(&latin1);
    bytes.push(b'\n');
    bytes.extend_from_slice(&rec(&m2));
    bytes.push(b'\n');
    std::fs::create_dir_all(dir.path_of("s").unwrap().parent().unwrap()).unwrap();
    std::fs::write(dir.path_of("s").unwrap(), bytes).unwrap();
    let t = dir.load("s").unwrap();
    assert_eq!(t.skipped_lines, 1, "the line that is no record is counted");
    let conversation = t.conversation();
    assert_eq!(conversation.len(), 3, "{conversation:?}");
    assert_eq!(conversation[0], m1, "the line before survives");
    assert_eq!(conversation[2], m2, "the line after survives");
    assert!(
        format!("{:?}", conversation[1]).contains("caf\u{FFFD}"),
        "the Latin-1 record is kept, its bad byte replaced: {:?}",
        conversation[1]
    );
}

/// A query typed without accents finds a message written with them, and its snippet is placed
/// at the accented words, not at the start of a long message.
#[test]
fn search_without_accents_places_the_snippet_at_the_accented_words() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    let long = format!(
        "{} Ensuite, la réunion de Genève est déplacée au lundi.",
        "Nous avons parlé du budget et des recrutements pendant longtemps. ".repeat(8)
    );
    write_session(
        &dir,
        "old",
        &[long.as_str(), "Новогоднюю ёлку ставят двадцатого декабря"],
    );
    let opts = SearchOptions::default();
    let first = |q: &str| {
        let hits = dir.search(q, &opts).unwrap();
        assert_eq!(hits.len(), 1, "{q}: {hits:?}");
        hits[0].snippet.clone()
    };
    let shown = first("reunion geneve");
    assert!(shown.contains("réunion de Genève"), "{shown}");
    assert!(shown.starts_with('…'), "{shown}");
    assert!(first("елку").contains("ёлку"));
}

/// A password the user pasted into a session: the JSONL keeps it (faithful, as Claude Code keeps
/// transcripts), but `transcript_search` never puts it back into the model's context, in the
/// snippet nor by being searched for.
#[tokio::test]
async fn transcript_search_returns_redacted_text_and_the_file_stays_faithful() {
    const PASSWORD: &str = "Qw7zLp2Vn9";
    let tmp = tempfile::tempdir().unwrap();
    let dir = TranscriptDir::new(tmp.path());
    let model = ScriptedModel::new()
        .then(ScriptStep::tool(
            "echo",
            serde_json::json!({"login": "admin", "password": PASSWORD}),
        ))
        .then(ScriptStep::text("saved, the staging deploy can use it"));
    let mut past = agent(&dir, "past", model, Vec::new());
    past.run_turn(&format!(
        "the staging deploy needs the database: пароль администратора: {PASSWORD}"
    ))
    .await
    .unwrap();
    let on_disk = std::fs::read_to_string(dir.path_of("past").unwrap()).unwrap();
    assert!(
        on_disk.contains(PASSWORD),
        "the file is faithful: {on_disk}"
    );

    let tool = TranscriptSearchTool::new(dir.clone());
    let ctx = ToolContext {
        session_id: "now".into(),
        cwd: tmp.path().into(),
        agent: AgentKind::Main,
        cancel: Default::default(),
    };
    let out = tool
        .call(serde_json::json!({"query": "staging deploy"}), &ctx)
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(out.content.contains("[session past"), "{}", out.content);
    assert!(out.content.contains("[redacted: "), "{}", out.content);
    assert!(!out.content.contains(PASSWORD), "{}", out.content);
    // The tool input `{"password": …}` and its echo are found and redacted too.
    let input = tool
        .call(serde_json::json!({"query": "admin password"}), &ctx)
        .await;
    assert!(!input.content.contains(PASSWORD), "{}", input.content);
    // Searching for the secret itself finds nothing.
    let by_secret = tool
        .call(serde_json::json!({"query": PASSWORD}), &ctx)
        .await;
    assert!(
        by_secret.content.contains("No past session"),
        "{}",
        by_secret.content
    );
    for hit in dir.search("deploy", &SearchOptions::default()).unwrap() {
        assert!(!hit.snippet.contains(PASSWORD), "{hit:?}");
    }
}

/// With redaction on disk (`MEMLOOP_REDACT_TRANSCRIPTS=1`, read into `TranscriptConfig`), the
/// writer hook puts markers in the JSONL in place of the credential; off, it does not.
#[tokio::test]
async fn redaction_on_disk_is_a_setting() {
    use memloop_host::env::EnvVars;
    use memloop_transcripts::TranscriptConfig;
    const TOKEN: &str = "ghp_R8s2kLm4Qp7xZt1Vw9Yb3Nc6Hd0Jf5Ga2Ke";
    let on =
        TranscriptConfig::from_env(&EnvVars::from_pairs([("MEMLOOP_REDACT_TRANSCRIPTS", "1")]));
    let off =
        TranscriptConfig::from_env(&EnvVars::from_pairs([("MEMLOOP_REDACT_TRANSCRIPTS", "0")]));
    assert!(on.redact_on_disk && !off.redact_on_disk);
    assert!(!TranscriptConfig::default().redact_on_disk);
    for config in [on, off] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = TranscriptDir::new(tmp.path()).with_redaction_on_disk(config.redact_on_disk);
        let model = ScriptedModel::new().then(ScriptStep::text("noted"));
        let mut a = agent(&dir, "s", model, Vec::new());
        a.run_turn(&format!("use this token: {TOKEN} for the CI"))
            .await
            .unwrap();
        let text = std::fs::read_to_string(dir.path_of("s").unwrap()).unwrap();
        assert_eq!(
            text.contains(TOKEN),
            !config.redact_on_disk,
            "redact_on_disk={}: {text}",
            config.redact_on_disk
        );
        assert_eq!(
            text.contains("[redacted: "),
            config.redact_on_disk,
            "{text}"
        );
        // The file still reads, and what is not a credential is kept.
        let t = dir.load("s").unwrap();
        assert_eq!(t.skipped_lines, 0);
        assert!(t.records[0].text().contains("for the CI"));
    }
}
