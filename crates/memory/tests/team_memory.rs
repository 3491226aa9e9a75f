//! Private and team memory in one memory dir (Claude Code's layout): `team/` has its own index,
//! the memory section shows both with the rule for which goes where, the extractor chooses
//! between them, `user` memories and secrets never reach team memory. Real files in tempdirs,
//! text in Chinese, Japanese, Korean and Russian.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod extract_common;

use memloop_core::CancellationToken;
use memloop_core::prompt::SystemSection;
use memloop_core::tool::{AgentKind, Tool, ToolContext};
use memloop_files::FileMemoryStore;
use memloop_memory::extract::{EXTRACTOR_PURPOSE, ExtractorConfig, ForkedExtractor};
use memloop_memory::prompt::MemorySection;
use memloop_memory::tools::MemoryWriteTool;
use memloop_store::{
    ExpectedVersion, MemoryDoc, MemoryError, MemoryScope, MemoryStore, MemoryType, WriteMode,
};
use memloop_testkit::{ScriptStep, ScriptedModel};
use pretty_assertions::assert_eq;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

fn doc(name: &str, description: &str, kind: MemoryType, body: &str) -> MemoryDoc {
    MemoryDoc::new(name, description, kind, body)
}

/// A store with two private memories and two team memories.
async fn seeded(dir: &Path) -> FileMemoryStore {
    let store = FileMemoryStore::open(dir).unwrap();
    for (rel, d) in [
        (
            "feedback_回答.md",
            doc(
                "回答风格",
                "用户喜欢简短的中文回答",
                MemoryType::Feedback,
                "回答要简短。",
            ),
        ),
        (
            "user_роль.md",
            doc(
                "Роль",
                "бэкенд-разработчик, новичок во фронтенде",
                MemoryType::User,
                "Десять лет Go.",
            ),
        ),
        (
            "team/release.md",
            doc(
                "発布プロセス",
                "リリースは毎週火曜日",
                MemoryType::Project,
                "火曜日の午後にリリースする。",
            ),
        ),
        (
            "team/대시보드.md",
            doc(
                "지연 대시보드",
                "API 지연 시간 그라파나 보드",
                MemoryType::Reference,
                "https://grafana.example.invalid/d/api",
            ),
        ),
    ] {
        store.write(rel, &d, WriteMode::Overwrite).await.unwrap();
    }
    store
}

#[tokio::test]
async fn each_scope_has_its_own_index_and_recall_sees_both() {
    let tmp = tempfile::tempdir().unwrap();
    let store = seeded(tmp.path()).await;

    let private = read(&tmp.path().join("MEMORY.md"));
    assert_eq!(
        private,
        "- [回答风格](feedback_回答.md) — 用户喜欢简短的中文回答\n\
         - [Роль](user_роль.md) — бэкенд-разработчик, новичок во фронтенде\n"
    );
    // Links relative to `team/`: the subdirectory is a memory dir of its own.
    let team = read(&tmp.path().join("team/MEMORY.md"));
    assert_eq!(
        team,
        "- [発布プロセス](release.md) — リリースは毎週火曜日\n\
         - [지연 대시보드](대시보드.md) — API 지연 시간 그라파나 보드\n"
    );

    // The scan (recall, the manifest) sees every memory, and no index as a memory.
    let mut all: Vec<String> = store
        .scan()
        .await
        .unwrap()
        .into_iter()
        .map(|h| h.rel_path)
        .collect();
    all.sort();
    assert_eq!(
        all,
        [
            "feedback_回答.md",
            "team/release.md",
            "team/대시보드.md",
            "user_роль.md"
        ]
    );
    assert_eq!(
        store
            .load_scope_index(MemoryScope::Team)
            .await
            .unwrap()
            .content,
        team.trim_end()
    );
    let entries: Vec<String> = store
        .index_entries()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file)
        .collect();
    assert_eq!(
        entries,
        [
            "feedback_回答.md",
            "user_роль.md",
            "team/release.md",
            "team/대시보드.md"
        ]
    );

    // A store opened on `team/` (what the team sync opens) reads the same index and memories.
    let team_store = FileMemoryStore::open(tmp.path().join("team")).unwrap();
    let entries: Vec<String> = team_store
        .index_entries()
        .await
        .unwrap()
        .into_iter()
        .map(|e| e.file)
        .collect();
    assert_eq!(entries, ["release.md", "대시보드.md"]);
    assert_eq!(team_store.scan().await.unwrap().len(), 2);
    // ...and its writes land in the same index, which the full store then shows.
    team_store
        .write(
            "oncall.md",
            &doc(
                "Дежурства",
                "кто дежурит по выходным",
                MemoryType::Project,
                "Смена в субботу.",
            ),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert!(
        store
            .load_scope_index(MemoryScope::Team)
            .await
            .unwrap()
            .content
            .ends_with("- [Дежурства](oncall.md) — кто дежурит по выходным")
    );
    assert!(!read(&tmp.path().join("MEMORY.md")).contains("oncall"));
}

#[tokio::test]
async fn delete_and_rename_keep_each_index_right() {
    let tmp = tempfile::tempdir().unwrap();
    let store = seeded(tmp.path()).await;

    store.delete("team/대시보드.md").await.unwrap();
    assert_eq!(
        read(&tmp.path().join("team/MEMORY.md")),
        "- [発布プロセス](release.md) — リリースは毎週火曜日\n"
    );

    // Private → team: the line moves to the team index, title and hook kept.
    store
        .rename("feedback_回答.md", "team/回答.md")
        .await
        .unwrap();
    assert!(!read(&tmp.path().join("MEMORY.md")).contains("回答"));
    assert!(
        read(&tmp.path().join("team/MEMORY.md"))
            .contains("- [回答风格](回答.md) — 用户喜欢简短的中文回答")
    );
    // Team → private, and within team.
    store.rename("team/release.md", "release.md").await.unwrap();
    assert!(
        read(&tmp.path().join("MEMORY.md"))
            .contains("- [発布プロセス](release.md) — リリースは毎週火曜日")
    );
    store.rename("team/回答.md", "team/风格.md").await.unwrap();
    assert_eq!(
        read(&tmp.path().join("team/MEMORY.md")),
        "- [回答风格](风格.md) — 用户喜欢简短的中文回答\n"
    );

    // Clear removes both indexes and every memory.
    let mut removed = store.clear().await.unwrap();
    removed.sort();
    assert_eq!(removed, ["release.md", "team/风格.md", "user_роль.md"]);
    assert!(!tmp.path().join("MEMORY.md").exists());
    assert!(!tmp.path().join("team/MEMORY.md").exists());
    assert!(store.scan().await.unwrap().is_empty());
}

#[tokio::test]
async fn a_private_line_left_for_a_team_memory_moves_to_the_team_index() {
    // Before `team/` had its own index, its memories were listed in MEMORY.md.
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(tmp.path().join("team")).unwrap();
    std::fs::write(
        tmp.path().join("MEMORY.md"),
        "- [Старое](old.md) — частное\n- [看板](team/看板.md) — 旧的索引行\n",
    )
    .unwrap();
    std::fs::write(
        tmp.path().join("team/看板.md"),
        "---\nname: 看板\ndescription: 旧的索引行\ntype: reference\n---\n\n旧内容\n",
    )
    .unwrap();
    let store = FileMemoryStore::open(tmp.path()).unwrap();
    store
        .write(
            "team/看板.md",
            &doc("看板", "团队看板地址", MemoryType::Reference, "新内容"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap();
    assert_eq!(
        read(&tmp.path().join("MEMORY.md")),
        "- [Старое](old.md) — частное\n"
    );
    assert_eq!(
        read(&tmp.path().join("team/MEMORY.md")),
        "- [看板](看板.md) — 团队看板地址\n"
    );
}

#[tokio::test]
async fn user_memories_and_secrets_never_reach_team_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(tmp.path()).unwrap());

    // A `user` memory under team/ is refused, by the store and through the tool.
    let err = store
        .write(
            "team/ユーザー.md",
            &doc("ユーザー", "ユーザーの経歴", MemoryType::User, "Go歴10年"),
            WriteMode::Overwrite,
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("private memory"), "{err}");
    let tool = MemoryWriteTool::new(store.clone());
    let ctx = ToolContext {
        session_id: "s1".into(),
        cwd: tmp.path().to_path_buf(),
        agent: AgentKind::Main,
        cancel: CancellationToken::new(),
    };
    let out = tool
        .call(
            json!({"topic": "team/사용자", "content": "백엔드 개발자", "type": "user"}),
            &ctx,
        )
        .await;
    assert!(
        out.is_error && out.content.contains("private memory"),
        "{out:?}"
    );

    // Credentials are refused in team memory in every language, structured or raw.
    let secrets = [
        "生产数据库密码: Xk9#mP2$vL8qR4nT",
        "本番のAPIキー sk-proj-4f8a9b2c7d1e6f3a0b5c8d2e9f4a7b1c",
        "пароль от базы: password=Tr0ub4dor&3xyz",
    ];
    for secret in secrets {
        let err = store
            .write(
                "team/凭据.md",
                &doc("凭据", "生产环境", MemoryType::Reference, secret),
                WriteMode::Overwrite,
            )
            .await
            .unwrap_err();
        assert!(
            matches!(err, MemoryError::SensitiveData { .. }),
            "{secret}: {err:?}"
        );
        let raw = format!("---\nname: 凭据\ndescription: 生产\ntype: reference\n---\n\n{secret}\n");
        let err = store
            .write_raw_if("team/凭据.md", &raw, &ExpectedVersion::Any)
            .await
            .unwrap_err();
        assert!(matches!(err, MemoryError::SensitiveData { .. }), "{err:?}");
    }
    assert!(!tmp.path().join("team/凭据.md").exists());

    // The tool writes `team/<topic>` into team memory and says which index it updated.
    let out = tool
        .call(
            json!({"topic": "team/发布流程", "content": "每周二发布。", "name": "发布流程",
                   "description": "团队每周二发布", "type": "project"}),
            &ctx,
        )
        .await;
    assert!(!out.is_error, "{out:?}");
    assert!(out.content.contains("team/MEMORY.md"), "{}", out.content);
    assert!(read(&tmp.path().join("team/MEMORY.md")).contains("(发布流程.md)"));
    // Nothing else nests: `a/b` is not a topic.
    let out = tool
        .call(json!({"topic": "notes/发布", "content": "x"}), &ctx)
        .await;
    assert!(out.is_error);
}

#[tokio::test]
async fn the_memory_section_shows_both_indexes_and_the_rule() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(seeded(tmp.path()).await);

    let text = MemorySection::new(store.clone())
        .team(true)
        .compute()
        .await
        .unwrap();
    assert!(text.contains("## Private and team memory"), "{text}");
    assert!(text.contains("**user**: always private"));
    assert!(text.contains("never put credentials"));
    let private_at = text.find("## Index (MEMORY.md)").unwrap();
    let team_at = text.find("## Team index (team/MEMORY.md)").unwrap();
    assert!(text.find("## Private and team memory").unwrap() < private_at);
    assert!(private_at < team_at);
    assert!(text[private_at..team_at].contains("(feedback_回答.md)"));
    assert!(!text[private_at..team_at].contains("release.md"));
    assert!(text[team_at..].contains("- [発布プロセス](release.md) — リリースは毎週火曜日"));
    assert!(text[team_at..].contains("(대시보드.md)"));

    // Off (the default): the section is the private one alone.
    let plain = MemorySection::new(store).compute().await.unwrap();
    assert!(!plain.contains("team/MEMORY.md") && !plain.contains("Private and team"));

    // An empty team index says so.
    let empty = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(FileMemoryStore::open(empty.path()).unwrap());
    let text = MemorySection::new(store)
        .team(true)
        .compute()
        .await
        .unwrap();
    assert!(text.contains("team/MEMORY.md is empty"));
}

#[tokio::test]
async fn the_extractor_is_told_the_rule_and_writes_team_memory() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn MemoryStore> = Arc::new(seeded(tmp.path()).await);
    let team_on = ForkedExtractor::new(store.clone()).config(ExtractorConfig {
        team: true,
        ..ExtractorConfig::default()
    });
    let prompt = team_on.prompt(2).await.unwrap();
    assert!(prompt.contains("## Private and team memory"), "{prompt}");
    assert!(prompt.contains("`team/<name>`"));
    // The manifest lists both scopes' memories.
    assert!(prompt.contains("team/release.md") && prompt.contains("feedback_回答.md"));
    let off = ForkedExtractor::new(store.clone()).prompt(2).await.unwrap();
    assert!(!off.contains("Private and team memory"));

    // A run that saves a team convention and a personal preference: each lands in its scope.
    let model = Arc::new(ScriptedModel::new());
    model.push_for(
        EXTRACTOR_PURPOSE,
        ScriptStep::tools(vec![
            (
                "memory_write".into(),
                json!({"topic": "team/код_ревью", "content": "Два одобрения на PR.",
                       "name": "Код-ревью", "description": "правило двух одобрений", "type": "feedback"}),
            ),
            (
                "memory_write".into(),
                json!({"topic": "feedback_이모지", "content": "이모지를 쓰지 말 것.",
                       "name": "이모지", "description": "답변에 이모지 금지", "type": "feedback"}),
            ),
        ]),
    );
    model.push_for(EXTRACTOR_PURPOSE, ScriptStep::text("saved"));
    let (written, _) = extract_common::run_extractor(&team_on, model).await;
    assert_eq!(written.len(), 2);
    assert!(read(&tmp.path().join("team/MEMORY.md")).contains("(код_ревью.md)"));
    assert!(read(&tmp.path().join("MEMORY.md")).contains("(feedback_이모지.md)"));
    assert!(!read(&tmp.path().join("MEMORY.md")).contains("код_ревью"));
}

#[test]
fn the_full_store_and_a_team_dir_store_write_the_team_index_together_without_loss() {
    // The agent writes team memory through the full store while the team sync writes through a
    // store opened on `team/`: both change `team/MEMORY.md`, and both take the team dir's lock.
    let tmp = tempfile::tempdir().unwrap();
    let full = FileMemoryStore::open(tmp.path()).unwrap();
    let team = FileMemoryStore::open(tmp.path().join("team")).unwrap();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .build()
        .unwrap();
    const EACH: usize = 40;
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    rt.block_on(async {
        let write_all = |store: FileMemoryStore, prefix: &'static str, name: &'static str| {
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                for i in 0..EACH {
                    // Create, then change the description (an index line rewrite).
                    for round in ["первый", "второй"] {
                        let d = doc(
                            &format!("{name}{i}"),
                            &format!("{round} 版本 {i}"),
                            MemoryType::Project,
                            "本文",
                        );
                        store
                            .write(&format!("{prefix}{name}{i}.md"), &d, WriteMode::Overwrite)
                            .await
                            .unwrap();
                    }
                }
            })
        };
        let a = write_all(full.clone(), "team/", "代理");
        let b = write_all(team.clone(), "", "同步");
        a.await.unwrap();
        b.await.unwrap();
    });
    let index = read(&tmp.path().join("team/MEMORY.md"));
    let lines: Vec<&str> = index.lines().collect();
    assert_eq!(lines.len(), 2 * EACH, "{index}");
    for name in ["代理", "同步"] {
        for i in 0..EACH {
            let line = format!("- [{name}{i}]({name}{i}.md) — второй 版本 {i}");
            assert_eq!(
                lines.iter().filter(|l| **l == line).count(),
                1,
                "{line} in\n{index}"
            );
        }
    }
    assert!(read(&tmp.path().join("MEMORY.md")).is_empty());
}

#[cfg(unix)]
#[tokio::test]
async fn a_team_symlink_out_of_the_memory_dir_gets_nothing_written() {
    let tmp = tempfile::tempdir().unwrap();
    let (mem, outside) = (tmp.path().join("mem"), tmp.path().join("外部"));
    std::fs::create_dir_all(&outside).unwrap();
    let store = FileMemoryStore::open(&mem).unwrap();
    std::os::unix::fs::symlink(&outside, mem.join("team")).unwrap();
    let d = doc("部署", "只在周二", MemoryType::Project, "周二。");
    let err = store
        .write("team/部署.md", &d, WriteMode::Overwrite)
        .await
        .unwrap_err();
    assert!(
        matches!(err, MemoryError::OutsideMemoryDir { .. }),
        "{err:?}"
    );
    store
        .write("private.md", &d, WriteMode::Overwrite)
        .await
        .unwrap();
    store.clear().await.unwrap();
    assert_eq!(std::fs::read_dir(&outside).unwrap().count(), 0);
}
