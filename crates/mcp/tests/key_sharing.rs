//! Authorization on the key a memory is stored under, as a table: key-sharing shape × store ×
//! token kind, over real Streamable HTTP on loopback, on the memory dir and on the machine's
//! PostgreSQL.
//!
//! In every shape two project paths can map to one memory: a lossy slug (`a/b`, `a-b`, `a_b`,
//! non-ASCII letters all become `-`), a git root above the token's glob, one git origin, a
//! memory written before owners were recorded (memory dir) or under a pre-schema-6 id
//! (PostgreSQL). A token whose glob covers the *probe* path but not the *other* one must not
//! read the other's memory through the probe (load, search, list, resources), nor write into
//! it, nor take it over; the token for everything still reaches both. Where a store keeps the
//! two apart (PostgreSQL's `dir:` ids for slugs), the row checks they stay apart.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_files::FileMemoryStore;
use memloop_mcp::{McpConfig, Tokens};
use memloop_paths::MemoryDirResolver;
use memloop_store::{MemoryDoc, MemoryType, WriteMode};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use support::team::{TestTeam, URL};
use support::{Fixture, HttpSession, s};

const FULL: &str = "full-token-0123456789";
const GLOB_WRITE: &str = "globw-token-0123456789";
const GLOB_READ: &str = "globr-token-0123456789";
const ORIGIN_WRITE: &str = "originw-token-0123456789";

const MARK: &str = "ZEBRA-LEDGER-MARK";
const ORIGIN: &str = "https://git.example.com/acme/teamrepo.git";

#[derive(Debug, Clone, Copy, PartialEq)]
enum Store {
    Dir,
    Postgres,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Shape {
    /// `team/app` and `team-app`: one slug.
    SlashVsDash,
    /// `my_app` and `my-app`: one slug.
    UnderscoreVsDash,
    /// `mono/payments` inside the git repo `mono` (with an origin), `mono/auth` beside it.
    GitSubdirectory,
    /// `payments-fork` and `teamrepo`: two clones of one origin.
    SharedOrigin,
    /// Memory stored before owners were recorded (memory dir: by the CLI, no owner file) or
    /// under the old id `ledger` (PostgreSQL, migration 6's alias, unclaimed).
    Legacy,
    /// `团队/app` and `团队-app` (and `é/app` vs `ü-app`): one slug.
    NonAscii,
}

const SHAPES: [Shape; 6] = [
    Shape::SlashVsDash,
    Shape::UnderscoreVsDash,
    Shape::GitSubdirectory,
    Shape::SharedOrigin,
    Shape::Legacy,
    Shape::NonAscii,
];

fn git(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {out:?}");
}

fn repo(dir: &Path, origin: &str) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q"]);
    git(dir, &["remote", "add", "origin", origin]);
}

/// One row's paths: the token's glob covers `probe`, never `other`.
struct Row {
    glob: String,
    probe: PathBuf,
    other: PathBuf,
}

fn row(fx: &Fixture, shape: Shape) -> Row {
    let r = fx.root.display().to_string();
    let (glob, probe, other) = match shape {
        Shape::SlashVsDash => (
            format!("{r}/team/*"),
            fx.project("team/app"),
            fx.project("team-app"),
        ),
        Shape::UnderscoreVsDash => (
            format!("{r}/my_app*"),
            fx.project("my_app"),
            fx.project("my-app"),
        ),
        Shape::GitSubdirectory => {
            repo(&fx.root.join("mono"), ORIGIN);
            (
                format!("{r}/mono/payments*"),
                fx.project("mono/payments"),
                fx.project("mono/auth"),
            )
        }
        Shape::SharedOrigin => {
            repo(&fx.root.join("payments-fork"), ORIGIN);
            repo(&fx.root.join("teamrepo"), ORIGIN);
            (
                format!("{r}/payments*"),
                fx.root.join("payments-fork"),
                fx.root.join("teamrepo"),
            )
        }
        Shape::Legacy => (
            format!("{r}/payments-x/*"),
            fx.project("payments-x/ledger"),
            fx.project("ledger"),
        ),
        Shape::NonAscii => (
            format!("{r}/团队/*"),
            fx.project("团队/app"),
            fx.project("团队-app"),
        ),
    };
    Row { glob, probe, other }
}

/// A tool call's HTTP status and whole answer.
async fn call(session: &mut HttpSession, id: u64, tool: &str, args: Value) -> (u16, Value) {
    session
        .send(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                     "params": {"name": tool, "arguments": args}}))
        .await
}

/// Seed the other path's memory with [`MARK`] the way the shape says.
async fn seed(fx: &Fixture, store: Store, team: Option<&Arc<TestTeam>>, shape: Shape, row: &Row) {
    let doc = MemoryDoc::new(
        "ledger rule",
        format!("{MARK} the ledger rule"),
        MemoryType::Project,
        format!("{MARK}: the ledger closes at 17:00\n"),
    );
    match (shape, store) {
        (Shape::Legacy, Store::Dir) => {
            // Written by the single-user CLI, before the server recorded owners.
            let env = fx.config().env;
            let dir = MemoryDirResolver::new(&row.probe)
                .env(env)
                .resolve()
                .unwrap()
                .dir;
            let files = FileMemoryStore::open(&dir).unwrap();
            files
                .write("ledger.md", &doc, WriteMode::Overwrite)
                .await
                .unwrap();
        }
        (Shape::Legacy, Store::Postgres) => {
            // A pre-schema-6 row under the dir name, listed by migration 6 and not claimed.
            let schema = &team.unwrap().schema;
            let old = memloop_pg::PgMemoryStore::open(
                memloop_pg::PgConfig::new(URL, "ledger").schema(schema),
            )
            .await
            .unwrap();
            old.write("ledger.md", &doc, WriteMode::Overwrite)
                .await
                .unwrap();
            admin(&format!(
                "INSERT INTO {schema}.memloop_project_aliases (legacy_id) VALUES ('ledger') \
                 ON CONFLICT DO NOTHING"
            ))
            .await;
        }
        _ => {}
    }
}

async fn admin(sql: &str) {
    let (c, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c.batch_execute(sql).await.unwrap();
}

async fn alias_claimed(schema: &str) -> bool {
    let (c, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    c.query_one(
        &format!(
            "SELECT project_id FROM {schema}.memloop_project_aliases WHERE legacy_id = 'ledger'"
        ),
        &[],
    )
    .await
    .unwrap()
    .get::<_, Option<String>>(0)
    .is_some()
}

async fn run_row(store: Store, shape: Shape) -> usize {
    let fx = Fixture::new();
    let row = row(&fx, shape);
    let team = (store == Store::Postgres).then(TestTeam::new);
    let mut config: McpConfig = fx.config();
    config.stores = team
        .clone()
        .map(|t| t as Arc<dyn memloop_mcp::ProjectStores>);
    let tokens = Tokens::parse(&format!(
        "{FULL}\n{GLOB_WRITE} {g} write\n{GLOB_READ} {g} read\n{ORIGIN_WRITE} origin:{ORIGIN} write\n",
        g = row.glob
    ))
    .unwrap();
    let server = support::start_http_config(config, Some(tokens), None).await;
    let here = format!("{store:?} × {shape:?}");

    seed(&fx, store, team.as_ref(), shape, &row).await;
    let mut full = HttpSession::open(&server.url, FULL).await;
    if shape != Shape::Legacy {
        let (status, v) = call(
            &mut full,
            1,
            "context_save",
            json!({"project_path": s(&row.other), "entries": [
                {"type": "decision", "title": "ledger rule", "content": format!("{MARK}: the ledger closes at 17:00")}]}),
        )
        .await;
        assert_eq!(status, 200, "{here}: {v}");
        assert_eq!(
            v["result"]["structuredContent"]["written"], 1,
            "{here}: {v}"
        );
    }

    let mut checked = 0;
    for token in [GLOB_WRITE, GLOB_READ] {
        let mut session = HttpSession::open(&server.url, token).await;
        let p = s(&row.probe);
        let calls = [
            ("context_load", json!({"project_path": p, "detail": "full"})),
            (
                "context_search",
                json!({"project_path": p, "query": "ledger closes", "detail": "full"}),
            ),
            (
                "context_manage",
                json!({"project_path": p, "action": "list"}),
            ),
            (
                "context_save",
                json!({"project_path": p, "entries": [
                    {"type": "knowledge", "title": "probe", "content": format!("probe-from-{token}")}]}),
            ),
        ];
        for (i, (tool, args)) in calls.into_iter().enumerate() {
            let (status, v) = call(&mut session, 10 + i as u64, tool, args).await;
            let text = v.to_string();
            assert!(
                !text.contains(MARK),
                "{here}, {token}, {tool}: the other path's memory leaked ({status}): {text}"
            );
            if status == 403 {
                // The one refusal text, naming nothing of the disk.
                assert!(!text.contains(&s(&row.other)), "{here}: {text}");
            }
            checked += 1;
        }
        let (_, listed) = session
            .send(json!({"jsonrpc": "2.0", "id": 30, "method": "resources/list", "params": {}}))
            .await;
        for r in listed["result"]["resources"]
            .as_array()
            .into_iter()
            .flatten()
        {
            let (_, read) = session
                .send(
                    json!({"jsonrpc": "2.0", "id": 31, "method": "resources/read",
                             "params": {"uri": r["uri"]}}),
                )
                .await;
            assert!(
                !read.to_string().contains(MARK),
                "{here}, {token}: resource {} leaked: {read}",
                r["uri"]
            );
            checked += 1;
        }
    }

    // Nothing the limited tokens sent landed in, or took over, the other path's memory.
    if let (Shape::Legacy, Some(team)) = (shape, &team) {
        assert!(
            !alias_claimed(&team.schema).await,
            "{here}: a limited token claimed the old id"
        );
    }
    let (_, v) = call(
        &mut full,
        40,
        "context_load",
        json!({"project_path": s(&row.other), "detail": "full"}),
    )
    .await;
    let text = v.to_string();
    assert!(
        !text.contains("probe-from-"),
        "{here}: written across: {text}"
    );
    if shape == Shape::Legacy && store == Store::Postgres {
        // A read by the token for everything takes nothing over either; its first write does.
        assert!(!alias_claimed(&team.as_ref().unwrap().schema).await);
        let (status, v) = call(
            &mut full,
            41,
            "context_save",
            json!({"project_path": s(&row.other), "entries": [
                {"type": "knowledge", "title": "owner", "content": "the owner writes"}]}),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        let (_, v) = call(
            &mut full,
            42,
            "context_load",
            json!({"project_path": s(&row.other), "detail": "full"}),
        )
        .await;
        assert!(v.to_string().contains(MARK), "{here}: not claimed: {v}");
    } else if shape != Shape::Legacy {
        assert!(
            text.contains(MARK),
            "{here}: the seeded memory is gone: {text}"
        );
    }

    // A grant naming the origin reaches every checkout of it on the team store.
    if shape == Shape::SharedOrigin && store == Store::Postgres {
        let mut origin = HttpSession::open(&server.url, ORIGIN_WRITE).await;
        let (status, v) = call(
            &mut origin,
            50,
            "context_load",
            json!({"project_path": s(&row.probe), "detail": "full"}),
        )
        .await;
        assert_eq!(status, 200, "{v}");
        assert!(v.to_string().contains(MARK), "{here}: {v}");
    }
    checked
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_token_reaches_a_memory_another_path_shares_outside_its_grant() {
    use futures::FutureExt;
    let (mut checked, mut failed) = (0, Vec::new());
    // Every row runs, and the failures are reported together: the table says which shapes
    // and stores leak, not only the first.
    for store in [Store::Dir, Store::Postgres] {
        for shape in SHAPES {
            match std::panic::AssertUnwindSafe(run_row(store, shape))
                .catch_unwind()
                .await
            {
                Ok(n) => checked += n,
                Err(_) => failed.push(format!("{store:?} × {shape:?}")),
            }
        }
    }
    assert!(failed.is_empty(), "rows that failed: {failed:?}");
    assert!(checked >= 2 * 6 * 2 * 4, "{checked}");
}

#[tokio::test]
async fn a_second_owner_of_a_memory_dir_is_refused_with_a_clear_error() {
    let fx = Fixture::new();
    let (a, b) = (fx.project("team/app"), fx.project("team-app"));
    // Revealing the store: the answers name the memory dir the owner file is in.
    let mut config = fx.config();
    config.reveal_store = true;
    let server = support::start_http_config(config, None, None).await;
    let mut session = HttpSession::open(&server.url, "unused-token-0123456789").await;
    let save = |p: &Path| {
        json!({"project_path": s(p), "entries": [
            {"type": "knowledge", "title": "t", "content": format!("from {}", s(p))}]})
    };
    let first = session.tool("context_save", save(&a)).await;
    assert_eq!(first["written"], 1, "{first}");
    let second = session.tool("context_save", save(&b)).await;
    assert_eq!(second["is_error"], true, "{second}");
    let reason = second["reason"].as_str().unwrap();
    assert!(
        reason.contains("another project") && reason.contains("memory_dir"),
        "{reason}"
    );
    let owner = std::fs::read_to_string(
        Path::new(first["project"]["memory_dir"].as_str().unwrap()).join(memloop_mcp::OWNER_FILE),
    )
    .unwrap();
    assert_eq!(owner.trim_end(), s(&a));
}

#[tokio::test]
async fn a_limited_token_gets_one_refusal_text_whatever_lies_outside_its_grant() {
    let fx = Fixture::new();
    fx.project("payments-x");
    let secret = fx.project("secret");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&secret, fx.root.join("payments-link")).unwrap();
    let r = fx.root.display().to_string();
    let tokens = Tokens::parse(&format!("{GLOB_WRITE} {r}/payments* write\n")).unwrap();
    let server = support::start_http(&fx, Some(tokens), None).await;
    // Initialized (stateless: the requests below stand alone all the same).
    HttpSession::open(&server.url, GLOB_WRITE).await;
    let http = reqwest::Client::new();
    let mut texts = Vec::new();
    for path in [
        format!("{r}/../root"),
        format!("{r}/../root/definitely-not-here"),
        format!("{r}/payments-link"),
        s(&secret),
        "/".to_owned(),
        format!("{r}/payments-x/../secret"),
    ] {
        let r = http
            .post(&server.url)
            .bearer_auth(GLOB_WRITE)
            .header("Accept", "application/json, text/event-stream")
            .json(&json!({"jsonrpc": "2.0", "id": 60, "method": "tools/call",
                "params": {"name": "context_load", "arguments": {"project_path": path}}}))
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        assert_eq!(status, 403, "{path}: {text}");
        assert!(!text.trim().is_empty());
        texts.push((path, text));
    }
    let first = &texts[0].1;
    for (path, text) in &texts {
        assert_eq!(text, first, "{path} is refused with another text");
        assert!(
            !text.contains("secret") && !text.contains(&r),
            "{path}: {text}"
        );
    }
}

#[tokio::test]
async fn a_glob_naming_a_git_root_alone_does_not_cover_its_subdirectories_memory() {
    // `ROOT/mono` exactly: the repository's memory is also reached through `ROOT/mono/auth`,
    // which the glob does not match, so the glob does not cover that memory.
    let fx = Fixture::new();
    repo(&fx.root.join("mono"), ORIGIN);
    let auth = fx.project("mono/auth");
    let mono = fx.root.join("mono");
    let tokens = Tokens::parse(&format!("{FULL}\n{GLOB_WRITE} {} write\n", s(&mono))).unwrap();
    let server = support::start_http(&fx, Some(tokens), None).await;
    let mut full = HttpSession::open(&server.url, FULL).await;
    let saved = full
        .tool(
            "context_save",
            json!({"project_path": s(&auth), "entries": [
                {"type": "decision", "title": "ledger rule", "content": format!("{MARK}: closes at 17:00")}]}),
        )
        .await;
    assert_eq!(saved["written"], 1, "{saved}");
    let mut limited = HttpSession::open(&server.url, GLOB_WRITE).await;
    let (status, v) = call(
        &mut limited,
        2,
        "context_load",
        json!({"project_path": s(&mono), "detail": "full"}),
    )
    .await;
    assert!(!v.to_string().contains(MARK), "{status}: {v}");
    assert_eq!(status, 403, "{v}");
}

#[tokio::test]
async fn a_token_whose_project_lost_its_memory_dir_keeps_no_way_into_it() {
    // Two paths of one slug, each token limited to its own. A loads (and is remembered by the
    // server) before anyone wrote; then B's first save claims the dir.
    let fx = Fixture::new();
    let (a, b) = (fx.project("équipe/app"), fx.project("équipe-app"));
    const A: &str = "a-only-token-0123456789";
    const B: &str = "b-only-token-0123456789";
    let tokens = Tokens::parse(&format!("{A} {} write\n{B} {} write\n", s(&a), s(&b))).unwrap();
    let server = support::start_http(&fx, Some(tokens), None).await;
    let mut session_a = HttpSession::open(&server.url, A).await;
    let mut session_b = HttpSession::open(&server.url, B).await;
    let loaded = session_a
        .tool("context_load", json!({"project_path": s(&a)}))
        .await;
    assert_eq!(loaded["known"], false, "{loaded}");
    let id_a = loaded["project_id"].as_str().unwrap().to_owned();
    let saved = session_b
        .tool(
            "context_save",
            json!({"project_path": s(&b), "entries": [
                {"type": "knowledge", "title": "ledger", "content": format!("{MARK} lives here")}]}),
        )
        .await;
    assert_eq!(saved["written"], 1, "{saved}");
    // A's id, A's listing, A's tools: nothing of B's memory, and no path on disk.
    let uri = format!("{}{id_a}/MEMORY.md", memloop_mcp::RESOURCE_PREFIX);
    let (_, read) = session_a
        .send(
            json!({"jsonrpc": "2.0", "id": 40, "method": "resources/read",
                     "params": {"uri": uri}}),
        )
        .await;
    assert!(read["error"].is_object(), "{read}");
    assert!(!read.to_string().contains(MARK), "{read}");
    let (_, listed) = session_a
        .send(json!({"jsonrpc": "2.0", "id": 41, "method": "resources/list", "params": {}}))
        .await;
    let resources = listed["result"]["resources"].as_array().unwrap();
    assert!(resources.is_empty(), "{listed}");
    for (tool, args) in [
        ("context_load", json!({"project_path": s(&a)})),
        (
            "context_search",
            json!({"project_path": s(&a), "query": "ledger"}),
        ),
        (
            "context_save",
            json!({"project_path": s(&a), "entries": [
                {"type": "knowledge", "title": "ledger", "content": "A's ledger"}]}),
        ),
    ] {
        let answer = session_a.tool(tool, args).await;
        let text = answer.to_string();
        assert!(!text.contains(MARK), "{tool}: {text}");
        assert!(
            !text.contains(&s(&fx.home)),
            "{tool} names the memory dir: {text}"
        );
        assert!(!text.contains(&s(&b)), "{tool} names the owner: {text}");
    }
    // B's memory is B's alone.
    let dir = MemoryDirResolver::new(&b)
        .env(fx.config().env)
        .resolve()
        .unwrap()
        .dir;
    let owner = std::fs::read_to_string(dir.join(memloop_mcp::OWNER_FILE)).unwrap();
    assert_eq!(owner.trim_end(), s(&b));
    let found = session_b
        .tool(
            "context_search",
            json!({"project_path": s(&b), "query": "ledger"}),
        )
        .await;
    assert!(found.to_string().contains(MARK), "{found}");
}
