//! seen_bloom from Rust tokio-postgres (docs/CLIENTS.md#rust-tokio-postgres).
//!
//!     SEEN_BLOOM_DSN=postgresql://postgres@127.0.0.1:5432/postgres cargo run --release
//!
//! Creates two impressions tables of its own (bigint users and items; text users and uuid
//! items), tracks them, inserts impressions (multi-row and binary COPY), asks the feed
//! question, reads a bloom value through a `FromSql` type, checks the SQLSTATEs of three
//! mistakes, and drops the tables. Exits 1 when an answer is not the expected one.
//!
//! tokio-postgres prepares every statement and takes the parameter types the server infers;
//! a polymorphic parameter gives it nothing to infer from (42804 at prepare time), so the SQL
//! casts them: `$1::bigint`, `$2::bigint[]`. A `&str` is not a `regclass` parameter: write the
//! table name into the SQL, or pass it as `$1::text::regclass`.

use std::error::Error;
use std::pin::pin;
use std::process::ExitCode;

use bytes::BytesMut;
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{to_sql_checked, FromSql, IsNull, ToSql, Type};
use tokio_postgres::{Client, NoTls};
use uuid::Uuid;

type Result<T> = std::result::Result<T, Box<dyn Error + Send + Sync>>;

/// A `bloom` value: its binary form is its bytes (docs/FORMAT.md). tokio-postgres reads
/// results in binary, so `FromSql` gets exactly those bytes; `ToSql` sends them back as a
/// `bloom` parameter (the server validates the whole value, 22P02 otherwise).
#[derive(Debug, Clone, PartialEq)]
struct Bloom(Vec<u8>);

impl<'a> FromSql<'a> for Bloom {
    fn from_sql(
        _: &Type,
        raw: &'a [u8],
    ) -> std::result::Result<Self, Box<dyn Error + Sync + Send>> {
        Ok(Bloom(raw.to_vec()))
    }
    fn accepts(ty: &Type) -> bool {
        ty.name() == "bloom"
    }
}

impl ToSql for Bloom {
    fn to_sql(
        &self,
        _: &Type,
        out: &mut BytesMut,
    ) -> std::result::Result<IsNull, Box<dyn Error + Sync + Send>> {
        out.extend_from_slice(&self.0);
        Ok(IsNull::No)
    }
    fn accepts(ty: &Type) -> bool {
        ty.name() == "bloom"
    }
    to_sql_checked!();
}

#[derive(Debug)]
struct CheckFailed(String);
impl std::fmt::Display for CheckFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl Error for CheckFailed {}

fn check(ok: bool, what: impl Into<String>) -> Result<()> {
    let what = what.into();
    if !ok {
        return Err(Box::new(CheckFailed(what)));
    }
    println!("ok: {what}");
    Ok(())
}

/// The SQLSTATE of a statement that fails, None when it succeeds.
async fn sqlstate_of(
    client: &Client,
    sql: &str,
    params: &[&(dyn ToSql + Sync)],
) -> Option<SqlState> {
    client
        .query_one(sql, params)
        .await
        .err()
        .and_then(|e| e.code().cloned())
}

async fn run(client: &mut Client, impressions: &str, by_name: &str) -> Result<()> {
    client
        .batch_execute("CREATE EXTENSION IF NOT EXISTS seen_bloom")
        .await?;

    // --- tracking --------------------------------------------------------------------------
    client
        .batch_execute(&format!(
            "CREATE TABLE {impressions} (user_id bigint, post_id bigint,
                                         seen_at timestamptz NOT NULL DEFAULT now(), watch_pct real);
             CREATE TABLE {by_name} (user_name text, item uuid, seen_at timestamptz NOT NULL DEFAULT now());"
        ))
        .await?;
    let row = client
        .query_one(
            "SELECT seen_bloom.track($1::text::regclass, 'user_id', 'post_id', 'seen_at', \"where\" => 'watch_pct >= 0.5')::text",
            &[&impressions],
        )
        .await?;
    let filter_table: String = row.get(0);
    check(
        filter_table == format!("{impressions}_seen"),
        format!("track() made {filter_table}"),
    )?;
    client
        .execute(
            "SELECT seen_bloom.track($1::text::regclass, 'user_name', 'item', 'seen_at')",
            &[&by_name],
        )
        .await?;

    // --- batch inserts ---------------------------------------------------------------------
    // One multi-row INSERT: ($1, $2, $3), ($4, $5, $6), ...
    let mut rows: Vec<(i64, i64, f32)> = vec![
        (7, 1001, 0.9),
        (7, 1002, 1.0),
        (7, 1005, 0.1),
        (8, 1003, 0.7),
    ];
    rows.extend((0..50).map(|k| (9, 2000 + k, 1.0)));
    let placeholders: Vec<String> = (0..rows.len())
        .map(|i| format!("(${}, ${}, ${})", 3 * i + 1, 3 * i + 2, 3 * i + 3))
        .collect();
    let params: Vec<&(dyn ToSql + Sync)> = rows
        .iter()
        .flat_map(|(u, p, w)| [u as &(dyn ToSql + Sync), p, w])
        .collect();
    let tx = client.transaction().await?;
    let sql = format!(
        "INSERT INTO {impressions} (user_id, post_id, watch_pct) VALUES {}",
        placeholders.join(", ")
    );
    tx.execute(&sql, &params).await?;
    let seen: bool = tx
        .query_one(
            &format!("SELECT seen_bloom.has_seen('{impressions}', $1::bigint, $2::bigint)"),
            &[&7i64, &1001i64],
        )
        .await?
        .get(0);
    check(seen, "an impression is seen inside its own transaction")?;
    tx.commit().await?;

    // Binary COPY: the statement trigger folds the copied rows too.
    let sink = client
        .copy_in(&format!(
            "COPY {impressions} (user_id, post_id, watch_pct) FROM STDIN (FORMAT BINARY)"
        ))
        .await?;
    let mut writer = pin!(BinaryCopyInWriter::new(
        sink,
        &[Type::INT8, Type::INT8, Type::FLOAT4]
    ));
    for k in 0..1000i64 {
        writer
            .as_mut()
            .write(&[&10i64, &(5000 + k), &0.8f32])
            .await?;
    }
    writer.finish().await?;
    let alice = "alice";
    let seen_items: Vec<Uuid> = (0..3).map(|_| Uuid::new_v4()).collect();
    let sink = client
        .copy_in(&format!(
            "COPY {by_name} (user_name, item) FROM STDIN (FORMAT BINARY)"
        ))
        .await?;
    let mut writer = pin!(BinaryCopyInWriter::new(sink, &[Type::TEXT, Type::UUID]));
    for item in &seen_items {
        writer.as_mut().write(&[&alice, item]).await?;
    }
    writer.finish().await?;

    // --- the feed call ---------------------------------------------------------------------
    // Prepared once, run per request; the casts give the parameters their types.
    let feed = client
        .prepare(&format!(
            "SELECT seen_bloom.unseen('{impressions}', $1::bigint, $2::bigint[])"
        ))
        .await?;
    let unseen = |rows: tokio_postgres::Row| -> Vec<i64> { rows.get(0) };
    let got = unseen(
        client
            .query_one(
                &feed,
                &[&7i64, &vec![1001i64, 1003, 1002, 1004, 1005, 1003]],
            )
            .await?,
    );
    check(got == [1003, 1004, 1005], format!("user 7: unseen {got:?}"))?;
    let got = unseen(
        client
            .query_one(&feed, &[&10i64, &(5990i64..6010).collect::<Vec<_>>()])
            .await?,
    );
    check(
        got == (6000..6010).collect::<Vec<i64>>(),
        "COPY: 5990..5999 seen, 6000..6009 not",
    )?;
    let got = unseen(
        client
            .query_one(&feed, &[&9i64, &[2000i64, 2049, 2050].as_slice()])
            .await?,
    );
    check(got == [2050], "multi-row INSERT folded")?;
    let got = unseen(
        client
            .query_one(&feed, &[&7i64, &Vec::<i64>::new()])
            .await?,
    );
    check(got.is_empty(), "no candidates, no answer")?;
    let got = unseen(
        client
            .query_one(&feed, &[&None::<i64>, &vec![1001i64]])
            .await?,
    );
    check(got == [1001], "a NULL user has seen nothing")?;
    let new_item = Uuid::new_v4();
    let got: Vec<Uuid> = client
        .query_one(
            &format!("SELECT seen_bloom.unseen('{by_name}', $1::text, $2::uuid[])"),
            &[&alice, &vec![seen_items[0], new_item, seen_items[2]]],
        )
        .await?
        .get(0);
    check(got == [new_item], "alice: only the new uuid is unseen")?;

    // --- reading a bloom value -------------------------------------------------------------
    let row = client
        .query_one(
            &format!("SELECT seen_bloom.filter('{impressions}', $1::bigint)"),
            &[&7i64],
        )
        .await?;
    let value: Bloom = row.get(0);
    check(
        value.0.starts_with(b"SBLM"),
        format!("a bloom value of {} bytes", value.0.len()),
    )?;
    let row = client
        .query_one(
            "SELECT bloom_contains($1::bloom, $2::bigint[]), bloom_cardinality($1::bloom)",
            &[&value, &vec![1001i64, 1003]],
        )
        .await?;
    let (contains, cardinality): (Vec<bool>, i64) = (row.get(0), row.get(1));
    check(
        contains == [true, false] && cardinality == 2,
        "bloom_contains/bloom_cardinality of the value read",
    )?;
    // Vec<u8> reads bytea only: a bloom column needs the type above (or `::bytea` in the SQL).
    let as_bytes: Vec<u8> = client
        .query_one(
            &format!("SELECT seen_bloom.filter('{impressions}', 7::bigint)::bytea"),
            &[],
        )
        .await?
        .get(0);
    check(as_bytes == value.0, "::bytea gives the same bytes")?;

    // --- errors by SQLSTATE ----------------------------------------------------------------
    // 42804 when preparing: polymorphic parameters without casts.
    let err = client
        .prepare(&format!(
            "SELECT seen_bloom.unseen('{impressions}', $1, $2)"
        ))
        .await
        .err()
        .ok_or_else(|| CheckFailed("untyped parameters were accepted".into()))?;
    check(
        err.code() == Some(&SqlState::DATATYPE_MISMATCH)
            && err
                .as_db_error()
                .is_some_and(|e| e.message().contains("polymorphic")),
        "42804 could not determine polymorphic type",
    )?;
    let text_feed = format!("SELECT seen_bloom.unseen('{impressions}', $1::bigint, $2::text[])");
    check(
        sqlstate_of(client, &text_feed, &[&7i64, &vec!["1001"]]).await
            == Some(SqlState::DATATYPE_MISMATCH),
        "42804 wrong item family",
    )?;
    check(
        sqlstate_of(
            client,
            "SELECT seen_bloom.unseen('pg_class', $1::bigint, $2::bigint[])",
            &[&7i64, &vec![1i64]],
        )
        .await
            == Some(SqlState::OBJECT_NOT_IN_PREREQUISITE_STATE),
        "55000 not tracked",
    )?;
    check(
        sqlstate_of(client, &format!("SELECT seen_bloom.unseen('{impressions}', $1::bigint, ARRAY[[1, 2], [3, 4]]::bigint[])"), &[&7i64])
            .await
            == Some(SqlState::INVALID_PARAMETER_VALUE),
        "22023 two-dimensional candidates",
    )?;
    check(
        sqlstate_of(client, "SELECT bloom_empty($1::bigint)", &[&0i64]).await
            == Some(SqlState::INVALID_PARAMETER_VALUE),
        "22023 capacity 0",
    )?;
    check(
        sqlstate_of(
            client,
            "SELECT bloom_cardinality($1::bloom)",
            &[&Bloom(b"SBLM?".to_vec())],
        )
        .await
            == Some(SqlState::INVALID_TEXT_REPRESENTATION),
        "22P02 invalid bloom bytes",
    )?;
    Ok(())
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let Ok(dsn) = std::env::var("SEEN_BLOOM_DSN") else {
        eprintln!("set SEEN_BLOOM_DSN, e.g. postgresql://postgres@127.0.0.1:5432/postgres");
        return ExitCode::from(2);
    };
    let (mut client, connection) = match tokio_postgres::connect(&dsn, NoTls).await {
        Ok(pair) => pair,
        Err(e) => {
            eprintln!("FAIL: connecting: {e}");
            return ExitCode::FAILURE;
        }
    };
    let driver = tokio::spawn(async move {
        if let Err(e) = connection.await {
            eprintln!("connection error: {e}");
        }
    });
    let suffix = Uuid::new_v4().simple().to_string()[..10].to_string();
    let impressions = format!("impressions_rust_{suffix}");
    let by_name = format!("impressions_by_name_rust_{suffix}");
    let _ = client
        .batch_execute("SET client_min_messages = warning")
        .await;
    let outcome = run(&mut client, &impressions, &by_name).await;
    let dropped = client
        .batch_execute(&format!("DROP TABLE IF EXISTS {impressions}, {by_name}"))
        .await;
    drop(client);
    let _ = driver.await;
    match (outcome, dropped) {
        (Ok(()), Ok(())) => {
            println!("rust_tokio: all checks passed");
            ExitCode::SUCCESS
        }
        (Err(e), _) => {
            eprintln!("FAIL: {e}");
            ExitCode::FAILURE
        }
        (_, Err(e)) => {
            eprintln!("FAIL: dropping the tables: {e}");
            ExitCode::FAILURE
        }
    }
}
