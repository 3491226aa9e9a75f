//! What a store says it is: each kind of [`StoreLocation`] has its text, its identity, and
//! (only a directory) a dir; a remote URL never keeps its credentials.
#![allow(clippy::unwrap_used)]

use memloop_store::{MemoryPath, MemoryStore, StoreDescription, StoreLocation};
use memloop_testkit::MapStore;
use std::path::Path;

#[test]
fn a_directory_is_its_path() {
    let d = StoreDescription::directory(Path::new("/srv/mémoire/项目"));
    assert_eq!(d.to_string(), "/srv/mémoire/项目");
    assert_eq!(d.identity, "dir:/srv/mémoire/项目");
    assert_eq!(d.dir(), Some(Path::new("/srv/mémoire/项目")));
}

#[test]
fn a_database_names_its_engine_url_and_project() {
    let d = StoreDescription {
        location: StoreLocation::Database {
            engine: "postgres".into(),
            url: "postgres://ann@db:5432/team".into(),
            project: "проект".into(),
        },
        identity: "postgres:db/team#проект".into(),
    };
    assert_eq!(
        d.to_string(),
        "postgres database postgres://ann@db:5432/team, project `проект`"
    );
    assert_eq!(d.dir(), None);
}

#[test]
fn a_store_in_memory_is_named_and_has_no_dir() {
    let d = StoreDescription::memory("карта-7");
    assert_eq!(
        d.location,
        StoreLocation::Memory {
            name: "карта-7".into()
        }
    );
    assert_eq!(d.to_string(), "in-memory store `карта-7`");
    assert_eq!(d.identity, "memory:карта-7");
    assert_eq!(d.dir(), None);
    assert_ne!(
        d.identity_hash(),
        StoreDescription::memory("карта-8").identity_hash()
    );
}

/// The test kit's map says it lives in memory, each map with an identity of its own, and names
/// its memories by their paths (no file).
#[test]
fn each_map_is_a_store_in_memory_of_its_own() {
    let (a, b) = (MapStore::new(), MapStore::new());
    let (da, db) = (a.describe(), b.describe());
    assert!(
        matches!(da.location, StoreLocation::Memory { .. }),
        "{da:?}"
    );
    assert!(da.to_string().starts_with("in-memory store `map-"), "{da}");
    assert_ne!(da.identity, db.identity);
    assert_ne!(da.to_string(), db.to_string());
    assert_eq!(da.dir(), None);
    let store: &dyn MemoryStore = &a;
    let path = MemoryPath::new("team/部署.md").unwrap();
    assert_eq!(store.target_path(&path), Path::new("team/部署.md"));
}

#[test]
fn a_remote_service_keeps_no_credentials() {
    let d = StoreDescription::remote("mem0", "https://api.example.com/v1", "web");
    assert_eq!(
        d.location,
        StoreLocation::Remote {
            service: "mem0".into(),
            url: "https://api.example.com/v1".into(),
            project: "web".into(),
        }
    );
    assert_eq!(
        d.to_string(),
        "mem0 service https://api.example.com/v1, project `web`"
    );
    assert_eq!(d.identity, "mem0:https://api.example.com/v1#web");
    assert_eq!(d.dir(), None);

    for (url, kept) in [
        (
            "https://alice:hunter2@api.example.com/v1",
            "https://api.example.com/v1",
        ),
        (
            "grpc://ghp_tok3n@mem.example.com:443",
            "grpc://mem.example.com:443",
        ),
        (
            "https://api.example.com/v1?API_KEY=sk-123&region=eu",
            "https://api.example.com/v1?API_KEY=***&region=eu",
        ),
        (
            "https://api.example.com/?access_token=abc&auth=xyz#frag",
            "https://api.example.com/?access_token=***&auth=***#frag",
        ),
        (
            "https://u:p@api.example.com?Client_Secret=s&ns=équipe",
            "https://api.example.com?Client_Secret=***&ns=équipe",
        ),
        // An `@` in the path is not a credential.
        (
            "https://api.example.com/users/a@b/mem",
            "https://api.example.com/users/a@b/mem",
        ),
    ] {
        let d = StoreDescription::remote("acme", url, "проект");
        let StoreLocation::Remote { url: shown, .. } = &d.location else {
            panic!("{d:?}");
        };
        assert_eq!(shown, kept, "{url}");
        for secret in ["hunter2", "ghp_tok3n", "sk-123", "abc", "xyz", "=s&"] {
            if !kept.contains(secret) {
                assert!(!d.to_string().contains(secret), "{d}");
                assert!(!d.identity.contains(secret), "{}", d.identity);
            }
        }
        assert!(d.to_string().ends_with("project `проект`"), "{d}");
    }
}
