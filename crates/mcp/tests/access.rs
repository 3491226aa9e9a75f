//! Authorization as a table: token kind × tool or resource × path shape, over real Streamable
//! HTTP on loopback. A token limited to `<root>/payments*` must reach exactly the projects whose
//! *canonical* path matches: not a sibling named through `..` or a symlink, not a project that
//! only shares a base name, not the global memory (which every project sees) for writing, and
//! not another project's index through `resources/list` or `resources/read`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use memloop_mcp::Tokens;
use serde_json::{Value, json};
use support::{Fixture, HttpSession, s};

const ADMIN: &str = "admin-token-0123456789";
const PAY_WRITE: &str = "paywrite-token-0123456789";
const PAY_READ: &str = "payread-token-0123456789";
const READ_ALL: &str = "readall-token-0123456789";

/// What a call does to the project it names.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Load,
    Search,
    Save,
    SaveGlobal,
    List,
    Update,
    Delete,
    DeleteGlobal,
    Init,
}

impl Op {
    const ALL: [Op; 9] = [
        Op::Load,
        Op::Search,
        Op::Save,
        Op::SaveGlobal,
        Op::List,
        Op::Update,
        Op::Delete,
        Op::DeleteGlobal,
        Op::Init,
    ];

    fn writes(self) -> bool {
        !matches!(self, Op::Load | Op::Search | Op::List)
    }

    fn global(self) -> bool {
        matches!(self, Op::SaveGlobal | Op::DeleteGlobal)
    }

    fn call(self, path: &str) -> (&'static str, Value) {
        let manage = |action: &str, target: &str| {
            json!({"project_path": path, "action": action, "target": target,
                   "content": "new body", "expected_version": "0".repeat(64)})
        };
        match self {
            Op::Load => ("context_load", json!({"project_path": path})),
            Op::Search => (
                "context_search",
                json!({"project_path": path, "query": "ledger"}),
            ),
            Op::Save => (
                "context_save",
                json!({"project_path": path, "entries": [
                    {"type": "knowledge", "title": "probe", "content": "probe entry"}]}),
            ),
            Op::SaveGlobal => (
                "context_save",
                json!({"project_path": path, "entries": [
                    {"type": "knowledge", "title": "global probe", "content": "g", "global": true}]}),
            ),
            Op::List => ("context_manage", manage("list", "")),
            Op::Update => ("context_manage", manage("update", "knowledge/ledger.md")),
            // Missing targets: an allowed delete is answered (not found) and the table's
            // seeded memories stay for the checks after it.
            Op::Delete => ("context_manage", manage("delete", "knowledge/absent.md")),
            Op::DeleteGlobal => (
                "context_manage",
                manage("delete", "global/knowledge/absent.md"),
            ),
            Op::Init => (
                "context_manage",
                json!({"project_path": path, "action": "init_project", "claude_md": false}),
            ),
        }
    }
}

/// A way of naming a project, and whether its canonical path lies under `<root>/payments*`.
struct Shape {
    name: &'static str,
    path: String,
    in_glob: bool,
}

#[tokio::test]
async fn every_token_reaches_exactly_the_projects_its_glob_names_for_every_tool_and_resource() {
    let fx = Fixture::new();
    let root = &fx.root;
    let own = fx.project("payments-x");
    let own_cjk = fx.project("payments-团队");
    let victim = fx.project("proj-a");
    let same_name = fx.project("payments-y/proj-a");
    let victim_cjk = fx.project("团队");
    #[cfg(unix)]
    std::os::unix::fs::symlink(&victim, root.join("payments-link")).unwrap();

    let tokens = Tokens::parse(&format!(
        "{ADMIN}\n{PAY_WRITE} {r}/payments* write\n{PAY_READ} {r}/payments* read\n{READ_ALL} read\n",
        r = root.display()
    ))
    .unwrap();
    let server = support::start_http(&fx, Some(tokens), None).await;

    // Seed every project (and the global memory) through the unrestricted token.
    let mut admin = HttpSession::open(&server.url, ADMIN).await;
    for p in [&own, &own_cjk, &victim, &same_name, &victim_cjk] {
        let (status, v) = admin
            .call_tool(
                "context_save",
                json!({"project_path": s(p), "entries": [
                    {"type": "knowledge", "title": "ledger", "content": format!("ledger of {}", s(p))}]}),
            )
            .await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["result"]["structuredContent"]["written"], 1, "{v}");
    }
    let (_, v) = admin
        .call_tool(
            "context_save",
            json!({"project_path": s(&own), "entries": [
                {"type": "knowledge", "title": "shared", "content": "global", "global": true}]}),
        )
        .await;
    assert_eq!(v["result"]["structuredContent"]["written"], 1, "{v}");

    #[cfg_attr(not(unix), allow(unused_mut))] // the symlink shape is Unix-only
    let mut shapes = vec![
        Shape {
            name: "own project",
            path: s(&own),
            in_glob: true,
        },
        Shape {
            name: "own project, non-ASCII name",
            path: s(&own_cjk),
            in_glob: true,
        },
        Shape {
            name: "own project spelled with a trailing /.",
            path: format!("{}/.", s(&own)),
            in_glob: true,
        },
        Shape {
            name: "`..` out of an own project",
            path: format!("{}/../proj-a", s(&own)),
            in_glob: false,
        },
        Shape {
            name: "`..` into a non-ASCII sibling",
            path: format!("{}/../团队", s(&own)),
            in_glob: false,
        },
        Shape {
            name: "a project sharing a base name, inside the glob",
            path: s(&same_name),
            in_glob: true,
        },
        Shape {
            name: "another project",
            path: s(&victim),
            in_glob: false,
        },
        Shape {
            name: "a missing path inside the glob",
            path: format!("{}/payments-missing", root.display()),
            in_glob: false,
        },
    ];
    #[cfg(unix)]
    shapes.push(Shape {
        name: "a symlink named like the glob, pointing outside it",
        path: format!("{}/payments-link", root.display()),
        in_glob: false,
    });

    let mut checked = 0;
    // The unrestricted tokens last, so the checks in between see only the limited ones' effects.
    for token in [PAY_WRITE, PAY_READ, READ_ALL, ADMIN] {
        if token == ADMIN {
            // Nothing a limited or read-only token sent reached the victim or the global memory.
            for project in [&victim, &victim_cjk] {
                let (_, v) = admin
                    .call_tool(
                        "context_manage",
                        json!({"project_path": s(project), "action": "list"}),
                    )
                    .await;
                let listing = v["result"]["structuredContent"].to_string();
                assert!(listing.contains("ledger"), "{listing}");
                assert!(
                    !listing.contains("probe"),
                    "{} written: {listing}",
                    s(project)
                );
            }
            let (_, v) = admin
                .call_tool("context_load", json!({"project_path": s(&own)}))
                .await;
            let g = v["result"]["structuredContent"]["global_knowledge"].to_string();
            assert!(g.contains("shared") && !g.contains("global probe"), "{g}");
        }
        let mut session = HttpSession::open(&server.url, token).await;
        let limited = matches!(token, PAY_WRITE | PAY_READ);
        let may_write = matches!(token, ADMIN | PAY_WRITE);
        for shape in &shapes {
            for op in Op::ALL {
                let exists = shape.name != "a missing path inside the glob";
                let allowed = (!limited || shape.in_glob)
                    && (!op.writes() || may_write)
                    && (!op.global() || !op.writes() || !limited)
                    // A missing path is refused to everyone; a limited token gets 403.
                    && (exists || !limited);
                let (tool, args) = op.call(&shape.path);
                let (status, v) = session.call_tool(tool, args).await;
                let result = &v["result"]["structuredContent"];
                let forbidden = status == 403 || result["code"] == "forbidden";
                assert_eq!(
                    !forbidden, allowed,
                    "token {token}, {}, {op:?}: status {status}, answer {v}",
                    shape.name
                );
                if !allowed {
                    assert_eq!(status, 403, "a refusal by access is HTTP 403: {v}");
                }
                checked += 1;
            }
        }

        // resources/list names only the projects the token may read; resources/read of any
        // other is "not found".
        let (status, v) = session.request("resources/list", json!({})).await;
        assert_eq!(status, 200, "{v}");
        let listed: Vec<String> = v["result"]["resources"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["name"].as_str().unwrap().to_owned())
            .collect();
        for (project, in_glob) in [
            (&own, true),
            (&own_cjk, true),
            (&same_name, true),
            (&victim, false),
            (&victim_cjk, false),
        ] {
            let name = format!("memory index of {}", s(project));
            let visible = !limited || in_glob;
            assert_eq!(
                listed.contains(&name),
                visible,
                "token {token}: {name} in {listed:?}"
            );
            let uri = format!(
                "memloop://project/{}/MEMORY.md",
                memloop_mcp::project_id(project)
            );
            let (_, v) = session
                .request("resources/read", json!({ "uri": uri }))
                .await;
            let text = v["result"]["contents"][0]["text"].as_str();
            assert_eq!(
                text.is_some_and(|t| t.contains("ledger")),
                visible,
                "token {token}: read {uri}: {v}"
            );
            checked += 1;
        }
    }
    assert!(checked > 300, "{checked}");
}
