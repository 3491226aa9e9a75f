//! Every way into the file store obeys every write rule, with the same outcome: a write of fields
//! (`write`: the agent's memory tools, the extractor, dream, MCP saves), a write of a file's text
//! as is (`write_raw_if`: team pull, `memloop memory edit`, MCP updates that keep unknown
//! frontmatter) and a rename (`FileMemoryStore::rename`: `memloop memory rename`). The rules are
//! decided once, by `CheckedWrite`; this table proves no writer skips one. Before, a raw write
//! and a rename could put a `user` memory into `team/`, a rename skipped the rules entirely, and
//! the size cap measured the body for one writer and the whole text for another.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use memloop_store::{
    ExpectedVersion, FileMemoryStore, MemoryDoc, MemoryError, MemoryType, StoreConfig, WriteLimits,
    WriteMode,
};
use tempfile::TempDir;

/// What a rule says of a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    Written,
    /// A name the store refuses (or the scope rule, which names the path).
    BadName,
    Secret,
    TooLarge,
}

fn outcome(r: Result<(), MemoryError>) -> Outcome {
    match r {
        Ok(()) => Outcome::Written,
        Err(MemoryError::InvalidName { .. }) => Outcome::BadName,
        Err(MemoryError::SensitiveData { .. }) => Outcome::Secret,
        Err(MemoryError::TooLarge { .. }) => Outcome::TooLarge,
        Err(e) => panic!("unexpected error: {e:?}"),
    }
}

/// One case: where a memory goes and what it is.
struct Case {
    rule: &'static str,
    to: &'static str,
    doc: MemoryDoc,
    /// Text added to the frontmatter of the raw form (keys memloop does not know).
    extra_frontmatter: &'static str,
    expected: Outcome,
}

const LIMIT: usize = 4096;

fn cases() -> Vec<Case> {
    let plain = |t: MemoryType, body: &str| MemoryDoc::new("Заметка", "描述 line", t, body);
    vec![
        Case {
            rule: "a good memory",
            to: "team/deploy.md",
            doc: plain(MemoryType::Project, "Деплой по вторникам."),
            extra_frontmatter: "",
            expected: Outcome::Written,
        },
        Case {
            rule: "user memories never go under team/",
            to: "team/me.md",
            doc: plain(MemoryType::User, "Я предпочитаю краткие ответы."),
            extra_frontmatter: "",
            expected: Outcome::BadName,
        },
        Case {
            rule: "a secret in the body",
            to: "db.md",
            doc: plain(MemoryType::Project, "пароль: Qw7zLp2Vn9xT"),
            extra_frontmatter: "",
            expected: Outcome::Secret,
        },
        Case {
            rule: "never MEMORY.md",
            to: "MEMORY.md",
            doc: plain(MemoryType::Project, "x"),
            extra_frontmatter: "",
            expected: Outcome::BadName,
        },
        Case {
            rule: "the size cap counts the whole text, frontmatter included",
            to: "big.md",
            doc: MemoryDoc::new(
                "big",
                "я".repeat(LIMIT / 2),
                MemoryType::Project,
                "b".repeat(LIMIT / 2),
            ),
            extra_frontmatter: "",
            expected: Outcome::TooLarge,
        },
    ]
}

fn store(dir: &TempDir) -> FileMemoryStore {
    FileMemoryStore::open(dir.path())
        .unwrap()
        .with_config(StoreConfig {
            write: WriteLimits {
                max_text_bytes: LIMIT,
            },
            ..Default::default()
        })
}

#[tokio::test]
async fn every_writer_gives_the_same_outcome_for_every_rule() {
    let mut rows = 0;
    for case in cases() {
        // A write of fields.
        let dir = TempDir::new().unwrap();
        let s = store(&dir);
        let fields = outcome(
            s.write(case.to, &case.doc, WriteMode::Overwrite)
                .await
                .map(drop),
        );
        // A write of the file's text as is.
        let dir = TempDir::new().unwrap();
        let s = store(&dir);
        let mut text = case.doc.render();
        if !case.extra_frontmatter.is_empty() {
            text = text.replacen("---\n", &format!("---\n{}", case.extra_frontmatter), 1);
        }
        let raw = outcome(
            s.write_raw_if(case.to, &text, &ExpectedVersion::Any)
                .await
                .map(drop),
        );
        // A rename from a private path the memory was written to. What cannot be stored
        // anywhere (a secret, too large) is planted as a file, as a hand edit would leave it.
        let dir = TempDir::new().unwrap();
        let s = store(&dir);
        std::fs::write(dir.path().join("source.md"), &text).unwrap();
        let renamed = outcome(s.rename("source.md", case.to).await.map(drop));
        for (writer, got) in [
            ("write", fields),
            ("write_raw_if", raw),
            ("rename", renamed),
        ] {
            assert_eq!(
                got, case.expected,
                "{writer}: {} ({} -> {got:?})",
                case.rule, case.to
            );
            rows += 1;
        }
        if case.expected != Outcome::Written {
            assert!(
                !dir.path().join(case.to).exists() || case.to == "MEMORY.md",
                "{}: the refused rename moved the file",
                case.rule
            );
            assert!(dir.path().join("source.md").exists());
        }
    }
    assert_eq!(rows, 15);
}

#[tokio::test]
async fn a_secret_in_an_unknown_frontmatter_key_is_refused_by_raw_writes_and_renames() {
    let dir = TempDir::new().unwrap();
    let s = store(&dir);
    let text =
        "---\nname: n\ndescription: d\nmetadata:\n  api_key: AKIAABCDEFGH12345678\n---\n\nbody\n";
    let raw = s
        .write_raw_if("x.md", text, &ExpectedVersion::Any)
        .await
        .unwrap_err();
    assert!(matches!(raw, MemoryError::SensitiveData { .. }), "{raw:?}");
    std::fs::write(dir.path().join("planted.md"), text).unwrap();
    let renamed = s.rename("planted.md", "team/x.md").await.unwrap_err();
    assert!(
        matches!(renamed, MemoryError::SensitiveData { .. }),
        "{renamed:?}"
    );
}
