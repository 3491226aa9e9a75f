//! The PostgreSQL team store for the tools: a schema of its own per test (dropped when the
//! guard goes), one store per project path, with its transactions.
#![allow(dead_code)]

use memloop_host::env::EnvVars;
use memloop_mcp::{
    ClaimFuture, MemoryKey, OpenFuture, OpenStoreFuture, Project, ProjectStores, TeamStores,
};
use memloop_pg::PgConfig;
use memloop_store::{MemoryError, WriteLimits};
use std::sync::Arc;

/// The machine's PostgreSQL (trust auth).
pub const URL: &str = "host=127.0.0.1 port=5432 user=root dbname=test";

pub struct TestTeam {
    pub schema: String,
    /// The server's team stores in that schema, as `memloop mcp --database-url` opens them.
    stores: TeamStores,
    /// The `application_name` of its connections, when the test aims at them.
    application_name: Option<String>,
    /// Whether dropping it drops the schema (a schema shared by several servers is dropped
    /// by its own guard, [`DropSchema`]).
    owns_schema: bool,
}

impl TestTeam {
    pub fn new() -> Arc<Self> {
        let schema = format!("memloop_mcp_{}", uuid::Uuid::new_v4().simple());
        Arc::new(Self {
            stores: stores(&schema, None),
            schema,
            application_name: None,
            owns_schema: true,
        })
    }

    /// One server's stores in `schema`, shared with other servers, its connections named
    /// `application_name`.
    pub fn sharing(schema: &str, application_name: &str) -> Arc<Self> {
        Arc::new(Self {
            stores: stores(schema, Some(application_name)),
            schema: schema.to_owned(),
            application_name: Some(application_name.to_owned()),
            owns_schema: false,
        })
    }

    pub fn config(&self, project: &std::path::Path) -> PgConfig {
        let config = PgConfig::for_project_dir(URL, project).schema(&self.schema);
        match &self.application_name {
            Some(name) => config.application_name(name),
            None => config,
        }
    }
}

fn stores(schema: &str, application_name: Option<&str>) -> TeamStores {
    let stores = TeamStores::new(URL, EnvVars::from_process()).schema(schema);
    match application_name {
        Some(name) => stores.application_name(name),
        None => stores,
    }
}

impl ProjectStores for TestTeam {
    fn describe(&self) -> String {
        format!("postgres:test?schema={}", self.schema)
    }

    fn kind(&self) -> &'static str {
        "postgres"
    }

    fn key(&self, canonical: &std::path::Path) -> Result<MemoryKey, MemoryError> {
        self.stores.key(canonical)
    }

    fn claim_legacy<'a>(&'a self, project: &'a Project) -> ClaimFuture<'a> {
        self.stores.claim_legacy(project)
    }

    fn open<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenFuture<'a> {
        self.stores.open(project, limits)
    }

    fn open_store<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenStoreFuture<'a> {
        self.stores.open_store(project, limits)
    }

    fn pool_use(&self) -> Option<memloop_mcp::PoolUse> {
        self.stores.pool_use()
    }
}

impl Drop for TestTeam {
    fn drop(&mut self) {
        if self.owns_schema {
            drop_schema(&self.schema);
        }
    }
}

/// Drops a schema when the test ends, however it ends.
pub struct DropSchema(pub String);

impl Drop for DropSchema {
    fn drop(&mut self) {
        drop_schema(&self.0);
    }
}

/// Drop `schema`. Bounded: a test that panicked while a connection of its own still holds a
/// lock in the schema must fail, not hang on its cleanup.
pub fn drop_schema(schema: &str) {
    let sql = format!("SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {schema} CASCADE");
    let _ = std::thread::spawn(move || {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| e.to_string())?
            .block_on(async {
                let (c, conn) = tokio_postgres::connect(URL, tokio_postgres::NoTls).await?;
                tokio::spawn(conn);
                c.batch_execute(&sql).await
            })
            .map_err(|e| e.to_string())
    })
    .join();
}
