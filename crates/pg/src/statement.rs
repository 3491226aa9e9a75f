//! Every SQL statement the store runs on its pool's connections goes through [`Statements`]: each
//! one is prepared (cached per connection) and run inside its own client span, with the
//! OpenTelemetry database attributes: `db.system.name` (`postgresql`), `db.namespace` (the
//! database, `|schema` when the store names one), `db.operation.name` (the statement's first
//! keyword), `db.collection.name` (the memloop table it names) and `db.query.summary`
//! (operation and table). Never the statement's parameters, nor its text (only its summary),
//! nor a server error's message (it may quote a value): a failed statement records its
//! SQLSTATE as `error.type` and `db.response.status_code`.
//!
//! The health probe's `SELECT 1` ([`crate::PgPool::ping`]) is not traced: a balancer asks it
//! several times a second.

use deadpool_postgres::GenericClient;
use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};
use tracing::Instrument;

/// Parameters of a statement, as `tokio_postgres` takes them.
pub(crate) type Params<'p> = &'p [&'p (dyn ToSql + Sync)];

/// Runs statements for one store (its `db.namespace`), on whichever connection or transaction
/// it is given. Cheap to copy.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Statements<'a> {
    namespace: &'a str,
}

impl<'a> Statements<'a> {
    /// Statements of the database named `namespace` (`db.namespace`).
    pub(crate) fn new(namespace: &'a str) -> Self {
        Self { namespace }
    }

    /// `sql` on `client`: every row.
    pub(crate) async fn query(
        self,
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Vec<Row>, Error> {
        self.traced(sql, async {
            let statement = client.prepare_cached(sql).await?;
            client.query(&statement, params).await
        })
        .await
    }

    /// `sql` on `client`: the one row, if any (more is an error).
    pub(crate) async fn query_opt(
        self,
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Option<Row>, Error> {
        self.traced(sql, async {
            let statement = client.prepare_cached(sql).await?;
            client.query_opt(&statement, params).await
        })
        .await
    }

    /// `sql` on `client`: exactly one row.
    pub(crate) async fn query_one(
        self,
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<Row, Error> {
        self.traced(sql, async {
            let statement = client.prepare_cached(sql).await?;
            client.query_one(&statement, params).await
        })
        .await
    }

    /// `sql` on `client`: the number of rows it changed.
    pub(crate) async fn execute(
        self,
        client: &impl GenericClient,
        sql: &str,
        params: Params<'_>,
    ) -> Result<u64, Error> {
        self.traced(sql, async {
            let statement = client.prepare_cached(sql).await?;
            client.execute(&statement, params).await
        })
        .await
    }

    /// `sql` on `client` without parameters, unprepared (`BEGIN`, `COMMIT`, DDL): one or more
    /// statements separated by `;`, traced as one.
    pub(crate) async fn batch(self, client: &impl GenericClient, sql: &str) -> Result<(), Error> {
        self.traced(sql, client.batch_execute(sql)).await
    }

    /// `BEGIN` on `client`: its transaction.
    pub(crate) async fn begin<'c>(
        self,
        client: &'c mut deadpool_postgres::Client,
    ) -> Result<deadpool_postgres::Transaction<'c>, Error> {
        self.traced("BEGIN", client.transaction()).await
    }

    /// `COMMIT` of `tx`.
    pub(crate) async fn commit(self, tx: deadpool_postgres::Transaction<'_>) -> Result<(), Error> {
        self.traced("COMMIT", tx.commit()).await
    }

    /// `ROLLBACK` of `tx`.
    pub(crate) async fn rollback(
        self,
        tx: deadpool_postgres::Transaction<'_>,
    ) -> Result<(), Error> {
        self.traced("ROLLBACK", tx.rollback()).await
    }

    /// Run `run` (the statement `sql`) inside its client span.
    async fn traced<T>(
        self,
        sql: &str,
        run: impl std::future::Future<Output = Result<T, Error>>,
    ) -> Result<T, Error> {
        let summary = Summary::of(sql);
        let span = tracing::info_span!(
            "db",
            otel.name = %summary.text(),
            otel.kind = "client",
            otel.status_code = tracing::field::Empty,
            db.system.name = "postgresql",
            db.namespace = self.namespace,
            db.operation.name = summary.operation,
            db.collection.name = summary.collection,
            db.query.summary = %summary.text(),
            db.response.status_code = tracing::field::Empty,
            error.type = tracing::field::Empty,
        );
        let result = run.instrument(span.clone()).await;
        if let Err(e) = &result {
            // The SQLSTATE only: a server message may quote a value of the statement.
            let code = e.code().map_or("connection", |c| c.code());
            span.record("db.response.status_code", code);
            span.record("error.type", code);
            span.record("otel.status_code", "ERROR");
        }
        result
    }
}

/// What a statement's span says of it: its operation and the table it names, read from its
/// text (never its parameters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Summary<'s> {
    /// The first keyword, upper case (`SELECT`, `INSERT`, `BEGIN`, ...).
    operation: &'s str,
    /// The first memloop table named (`memloop_memories`), if any.
    collection: Option<&'s str>,
}

impl<'s> Summary<'s> {
    fn of(sql: &'s str) -> Self {
        // The words of the statement outside `--` comments.
        let words = || {
            sql.lines()
                .map(|line| line.split("--").next().unwrap_or(""))
                .flat_map(|code| code.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_')))
                .filter(|w| !w.is_empty())
        };
        let operation = words()
            .next()
            .and_then(|w| KEYWORDS.iter().find(|k| k.eq_ignore_ascii_case(w)))
            .copied()
            .unwrap_or("OTHER");
        let collection = words().find(|w| w.starts_with("memloop_"));
        Self {
            operation,
            collection,
        }
    }

    /// `db.query.summary`: `SELECT memloop_memories`, or the operation alone.
    fn text(&self) -> String {
        match self.collection {
            Some(table) => format!("{} {table}", self.operation),
            None => self.operation.to_owned(),
        }
    }
}

/// The first keywords of the statements the store runs.
const KEYWORDS: &[&str] = &[
    "SELECT", "INSERT", "UPDATE", "DELETE", "WITH", "BEGIN", "COMMIT", "ROLLBACK", "CREATE",
    "ALTER", "DROP", "SET", "LOCK", "TRUNCATE",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_summary_names_the_operation_and_the_table_never_a_value() {
        let s = Summary::of(
            "UPDATE memloop_memories SET body = $3 WHERE project_id = $1 AND rel_path = $2",
        );
        assert_eq!(s.text(), "UPDATE memloop_memories");
        let s = Summary::of("\n  select rel_path from memloop_memories m join memloop_x");
        assert_eq!(s.text(), "SELECT memloop_memories");
        assert_eq!(Summary::of("COMMIT").text(), "COMMIT");
        let s = Summary::of(
            "\n-- Rows of memloop_changes, one per path.\nCREATE TABLE memloop_text (t text)",
        );
        assert_eq!(s.text(), "CREATE memloop_text");
        assert_eq!(
            Summary::of("SELECT pg_current_snapshot()::text").text(),
            "SELECT"
        );
        // A statement with a literal: the literal is not a keyword nor a table.
        assert_eq!(Summary::of("'secret' garbage").text(), "OTHER");
    }
}
