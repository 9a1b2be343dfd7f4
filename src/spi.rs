//! A thin layer over PostgreSQL's SPI for the tracking functions: statements prepared once
//! per backend and kept, executed with raw datums, results read as raw datums.
//!

use pgrx::pg_sys;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ffi::CString;

/// A statement prepared with SPI and kept for the backend's life.
#[derive(Clone, Copy)]
pub struct Plan(pg_sys::SPIPlanPtr);

thread_local! {
    /// Plans by (relation they read or write, purpose).
    static PLANS: RefCell<HashMap<(pg_sys::Oid, &'static str), Plan>> = RefCell::new(HashMap::new());
}

/// Kept plans name their relations in SQL text, and PostgreSQL's plan cache replans them
/// after DDL, so they need no invalidation of their own; the tracking configuration cached
/// beside them does (a table untracked and tracked again gets a new filter table).
unsafe extern "C-unwind" fn on_relcache_invalidation(_arg: pg_sys::Datum, relid: pg_sys::Oid) {
    crate::tracking::forget_config(relid);
}

pub fn register_invalidation() {
    unsafe {
        pg_sys::CacheRegisterRelcacheCallback(
            Some(on_relcache_invalidation),
            pg_sys::Datum::from(0usize),
        )
    };
}

/// An open SPI connection; finished on drop (errors abort the transaction, which also
/// cleans SPI up, so drop order only matters on the success path).
pub struct Connection(());

impl Connection {
    pub fn open() -> Connection {
        let rc = unsafe { pg_sys::SPI_connect() };
        if rc != pg_sys::SPI_OK_CONNECT as i32 {
            pgrx::error!("seen_bloom: SPI_connect failed ({rc})");
        }
        Connection(())
    }

    /// The kept plan for (relid, purpose), prepared from `sql()` on first use.
    pub fn plan(
        &self,
        relid: pg_sys::Oid,
        purpose: &'static str,
        arg_types: &[pg_sys::Oid],
        sql: impl FnOnce() -> String,
    ) -> Plan {
        if let Some(plan) = PLANS.with(|p| p.borrow().get(&(relid, purpose)).copied()) {
            return plan;
        }
        let text = CString::new(sql()).expect("SQL without NUL bytes");
        let mut types = arg_types.to_vec();
        let plan = unsafe {
            let plan = pg_sys::SPI_prepare(text.as_ptr(), types.len() as i32, types.as_mut_ptr());
            if plan.is_null() {
                let code = pg_sys::SPI_result;
                pgrx::error!("seen_bloom: SPI_prepare failed ({code})");
            }
            pg_sys::SPI_keepplan(plan);
            Plan(plan)
        };
        PLANS.with(|p| p.borrow_mut().insert((relid, purpose), plan));
        plan
    }

    /// Executes `plan` with non-null arguments; returns the rows read (valid until drop).
    pub fn execute(&self, plan: Plan, args: &[pg_sys::Datum], read_only: bool) -> Rows<'_> {
        let mut args = args.to_vec();
        unsafe {
            let rc =
                pg_sys::SPI_execute_plan(plan.0, args.as_mut_ptr(), std::ptr::null(), read_only, 0);
            if rc < 0 {
                pgrx::error!("seen_bloom: SPI_execute_plan failed ({rc})");
            }
            let table = pg_sys::SPI_tuptable;
            let count = if table.is_null() {
                0
            } else {
                pg_sys::SPI_processed as usize
            };
            Rows {
                table,
                count,
                _connection: std::marker::PhantomData,
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        unsafe {
            pg_sys::SPI_finish();
        }
    }
}

/// The rows of one execution.
pub struct Rows<'c> {
    table: *mut pg_sys::SPITupleTable,
    count: usize,
    _connection: std::marker::PhantomData<&'c Connection>,
}

impl Rows<'_> {
    pub fn len(&self) -> usize {
        self.count
    }

    /// Column `col` (1-based) of row `row`, or None when NULL.
    pub fn datum(&self, row: usize, col: i32) -> Option<pg_sys::Datum> {
        assert!(row < self.count);
        unsafe {
            let tuple = *(*self.table).vals.add(row);
            let mut isnull = false;
            let d = pg_sys::SPI_getbinval(tuple, (*self.table).tupdesc, col, &mut isnull);
            (!isnull).then_some(d)
        }
    }
}
