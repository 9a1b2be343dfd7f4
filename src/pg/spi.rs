//! A thin layer over PostgreSQL's SPI: statements prepared (kept for the backend's life, see
//! [`plan`], or for one execution), executed with raw datums, results read as raw datums.

use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;

/// A statement prepared with SPI.
#[derive(Clone, Copy)]
pub struct Plan(pg_sys::SPIPlanPtr);

thread_local! {
    /// Plans by (relation they read or write, purpose).
    static PLANS: RefCell<HashMap<(pg_sys::Oid, &'static str), Plan>> = RefCell::new(HashMap::new());
}

/// The kept plan for (relid, purpose), prepared from `sql()` on first use. Never dropped: it
/// names its relations in SQL text, and PostgreSQL's plan cache replans it after DDL.
pub fn plan(
    conn: &Connection,
    relid: pg_sys::Oid,
    purpose: &'static str,
    arg_types: &[pg_sys::Oid],
    sql: impl FnOnce() -> String,
) -> Plan {
    if let Some(plan) = PLANS.with(|p| p.borrow().get(&(relid, purpose)).copied()) {
        return plan;
    }
    let plan = conn.prepare(&sql(), arg_types, true);
    PLANS.with(|p| p.borrow_mut().insert((relid, purpose), plan));
    plan
}

/// An open SPI connection; finished on drop (errors abort the transaction, which also
/// cleans SPI up, so drop order only matters on the success path).
pub struct Connection(());

impl Connection {
    pub fn open() -> Connection {
        // SAFETY: SPI_connect has no preconditions; it pushes a procedure context.
        let rc = unsafe { pg_sys::SPI_connect() };
        if rc != pg_sys::SPI_OK_CONNECT as i32 {
            pgrx::error!("seen_bloom: SPI_connect failed ({rc})");
        }
        Connection(())
    }

    /// Prepares `sql` with parameters of `arg_types`; kept for the backend's life when
    /// `keep` (see [`plan`]), else freed with this connection.
    pub fn prepare(&self, sql: &str, arg_types: &[pg_sys::Oid], keep: bool) -> Plan {
        let text = CString::new(sql).expect("SQL without NUL bytes");
        let mut types = arg_types.to_vec();
        // SAFETY: SPI is connected (self); `text` and `types` outlive the call, which copies
        // them; a kept plan moves to a context that outlives the connection.
        unsafe {
            let plan = pg_sys::SPI_prepare(text.as_ptr(), types.len() as i32, types.as_mut_ptr());
            if plan.is_null() {
                let code = pg_sys::SPI_result;
                pgrx::error!("seen_bloom: SPI_prepare failed ({code})");
            }
            if keep {
                pg_sys::SPI_keepplan(plan);
            }
            Plan(plan)
        }
    }

    /// Executes `plan` with non-null arguments; returns the rows read (valid until drop).
    pub fn execute(&self, plan: Plan, args: &[pg_sys::Datum], read_only: bool) -> Rows<'_> {
        let mut args = args.to_vec();
        // SAFETY: SPI is connected; `plan` was prepared by SPI with `args.len()` parameters
        // of the types the caller's datums have; SPI_tuptable and SPI_processed describe
        // this execution until the next one, which needs `&self` again after `Rows` is gone.
        unsafe {
            let rc =
                pg_sys::SPI_execute_plan(plan.0, args.as_mut_ptr(), std::ptr::null(), read_only, 0);
            if rc < 0 {
                pgrx::error!("seen_bloom: SPI_execute_plan failed ({rc})");
            }
            let table = pg_sys::SPI_tuptable;
            let processed = pg_sys::SPI_processed;
            let count = if table.is_null() {
                0
            } else {
                processed as usize
            };
            Rows {
                table,
                count,
                processed,
                _connection: std::marker::PhantomData,
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // SAFETY: pairs with the SPI_connect of `open`.
        unsafe {
            pg_sys::SPI_finish();
        }
    }
}

/// The rows of one execution.
pub struct Rows<'c> {
    table: *mut pg_sys::SPITupleTable,
    count: usize,
    processed: u64,
    _connection: std::marker::PhantomData<&'c Connection>,
}

impl Rows<'_> {
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the statement returned rows (a SELECT or RETURNING, even of none).
    pub fn has_columns(&self) -> bool {
        !self.table.is_null()
    }

    /// The rows the statement processed (inserted, deleted, returned).
    pub fn processed(&self) -> u64 {
        self.processed
    }

    /// Column `col` of row `row` in its type's text form, or None when NULL.
    pub fn output(&self, row: usize, col: i32) -> Option<String> {
        assert!(row < self.count);
        // SAFETY: `table` holds `count` rows (row < count); SPI_getvalue checks `col` and
        // returns a palloc'd NUL-terminated string, or NULL for a NULL value.
        unsafe {
            let tuple = *(*self.table).vals.add(row);
            let text = pg_sys::SPI_getvalue(tuple, (*self.table).tupdesc, col);
            (!text.is_null()).then(|| {
                std::ffi::CStr::from_ptr(text)
                    .to_string_lossy()
                    .into_owned()
            })
        }
    }

    /// Column `col` (1-based) of row `row`, or None when NULL.
    pub fn datum(&self, row: usize, col: i32) -> Option<pg_sys::Datum> {
        assert!(row < self.count);
        // SAFETY: `table` holds `count` rows (row < count) and lives while the connection
        // does; SPI_getbinval checks `col` against the descriptor.
        unsafe {
            let tuple = *(*self.table).vals.add(row);
            let mut isnull = false;
            let d = pg_sys::SPI_getbinval(tuple, (*self.table).tupdesc, col, &mut isnull);
            (!isnull).then_some(d)
        }
    }

    /// Column `col` of row `row` as text (the statement casts it to text), or None when NULL.
    pub fn text(&self, row: usize, col: i32) -> Option<String> {
        self.datum(row, col).map(|d| {
            // SAFETY: the caller's statement gives column `col` the type text, a varlena.
            let bytes = unsafe { crate::pg::varlena::varlena_bytes(d) };
            String::from_utf8_lossy(bytes).into_owned()
        })
    }
}
