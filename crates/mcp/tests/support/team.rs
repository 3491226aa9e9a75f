//! The PostgreSQL team store for the tools: a schema of its own per test (dropped when the
//! guard goes), one store per project path, with its transactions.
#![allow(dead_code)]

use memloop_mcp::{OpenFuture, OpenStoreFuture, OpenedStore, Project, ProjectStores};
use memloop_pg::{PgConfig, PgMemoryStore};
use memloop_store::{MemoryError, MemoryStore, WriteLimits};
use std::sync::Arc;

/// The machine's PostgreSQL (trust auth).
pub const URL: &str = "host=127.0.0.1 port=5432 user=root dbname=test";

pub struct TestTeam {
    pub schema: String,
    /// The `application_name` of its connections, when the test aims at them.
    application_name: Option<String>,
    /// Whether dropping it drops the schema (a schema shared by several servers is dropped
    /// by its own guard, [`DropSchema`]).
    owns_schema: bool,
}

impl TestTeam {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            schema: format!("memloop_mcp_{}", uuid::Uuid::new_v4().simple()),
            application_name: None,
            owns_schema: true,
        })
    }

    /// One server's stores in `schema`, shared with other servers, its connections named
    /// `application_name`.
    pub fn sharing(schema: &str, application_name: &str) -> Arc<Self> {
        Arc::new(Self {
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

impl ProjectStores for TestTeam {
    fn describe(&self) -> String {
        format!("postgres:test?schema={}", self.schema)
    }

    fn open<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenFuture<'a> {
        Box::pin(async move {
            let store = PgMemoryStore::open(self.config(&project.path).write_limits(limits))
                .await
                .map_err(MemoryError::from)?;
            Ok(Arc::new(store) as Arc<dyn MemoryStore>)
        })
    }

    fn open_store<'a>(&'a self, project: &'a Project, limits: WriteLimits) -> OpenStoreFuture<'a> {
        Box::pin(async move {
            let store = PgMemoryStore::open(self.config(&project.path).write_limits(limits))
                .await
                .map_err(MemoryError::from)?;
            Ok(OpenedStore::atomic(Arc::new(store)))
        })
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
