//! The background maintenance of tracked tables (`seen_bloom.maintenance`): with the library
//! in `shared_preload_libraries`, a launcher starts, every `seen_bloom.maintenance_naptime`,
//! one short-lived worker per database that allows connections; a worker in a database with
//! seen_bloom runs `expire` and `compact` for each tracked table once per generation of that
//! table (`seen_bloom._maintenance_due`), each step in a transaction of its own under
//! `statement_timeout`, through `seen_bloom._maintain`, which runs them as the table's owner,
//! skips a table a manual run holds (ops::maintenance_lock) and records what it did.
//! Short-lived workers hold no connection between rounds, so DROP DATABASE is rarely held up.

use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BackgroundWorkerStatus, DynamicBackgroundWorker,
    SignalWakeFlags,
};
use pgrx::{pg_guard, pg_sys, GucContext, GucFlags, GucRegistry, GucSetting, Spi};
use std::collections::HashMap;
use std::ffi::CString;
use std::time::{Duration, Instant};

pub static ENABLED: GucSetting<bool> = GucSetting::<bool>::new(true);
/// 10 s: a table of a '30 seconds' window and 3 generations is expired within a generation of
/// each generation's end; a round in a database with nothing due costs one connection.
pub static NAPTIME_SECONDS: GucSetting<i32> = GucSetting::<i32>::new(10);
pub static DATABASE: GucSetting<Option<CString>> =
    GucSetting::<Option<CString>>::new(Some(c"postgres"));

/// From _PG_init: the settings, and the launcher when the library is preloaded.
pub fn init() {
    GucRegistry::define_bool_guc(
        c"seen_bloom.maintenance",
        c"Runs expire and compact for every tracked table in a background worker.",
        c"Needs seen_bloom in shared_preload_libraries; off: schedule them yourself.",
        &ENABLED,
        GucContext::Sighup,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"seen_bloom.maintenance_naptime",
        c"Seconds between the maintenance launcher's rounds over the databases.",
        c"Each round starts one short-lived worker per database that allows connections.",
        &NAPTIME_SECONDS,
        1,
        3600,
        GucContext::Sighup,
        GucFlags::UNIT_S,
    );
    GucRegistry::define_string_guc(
        c"seen_bloom.maintenance_database",
        c"Database the maintenance launcher connects to, to list the databases.",
        c"It reads pg_database only.",
        &DATABASE,
        crate::pg::gucs::server_start_context(),
        GucFlags::default(),
    );
    if crate::pg::gucs::preloading() {
        BackgroundWorkerBuilder::new("seen_bloom maintenance launcher")
            .set_type("seen_bloom maintenance launcher")
            .set_library("seen_bloom")
            .set_function("seen_bloom_maintenance_launcher")
            .enable_spi_access()
            .set_restart_time(Some(Duration::from_secs(10)))
            .load();
    }
}

/// The OIDs a query's first column gives, inside a transaction.
fn oids(sql: &str) -> Vec<u32> {
    Spi::connect(|client| {
        client
            .select(
                &format!("SELECT o::pg_catalog.int8 FROM ({sql}) s(o)"),
                None,
                &[],
            )
            .map(|rows| {
                rows.filter_map(|row| row.get::<i64>(1).ok().flatten())
                    .map(|o| o as u32)
                    .collect()
            })
            .unwrap_or_default()
    })
}

/// Reloads the configuration after a SIGHUP.
fn reload_if_asked() {
    if BackgroundWorker::sighup_received() {
        // SAFETY: the postmaster's SIGHUP asks every process to reread its configuration.
        unsafe { pg_sys::ProcessConfigFile(pg_sys::GucContext::PGC_SIGHUP) };
    }
}

/// # Safety
/// Called by the postmaster only, as the launcher's entry point.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn seen_bloom_maintenance_launcher(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let database = DATABASE.get().map(|d| d.to_string_lossy().into_owned());
    BackgroundWorker::connect_worker_to_spi(Some(database.as_deref().unwrap_or("postgres")), None);
    let mut workers: HashMap<u32, DynamicBackgroundWorker> = HashMap::new();
    loop {
        reload_if_asked();
        // A worker still starting or running keeps its database's turn.
        workers
            .retain(|_, w| matches!(w.pid(), Ok(_) | Err(BackgroundWorkerStatus::NotYetStarted)));
        if ENABLED.get() {
            let databases = BackgroundWorker::transaction(|| {
                oids("SELECT oid FROM pg_catalog.pg_database WHERE datallowconn AND NOT datistemplate ORDER BY oid")
            });
            for database in databases {
                if workers.contains_key(&database) {
                    continue;
                }
                let started = BackgroundWorkerBuilder::new(&format!(
                    "seen_bloom maintenance of database {database}"
                ))
                .set_type("seen_bloom maintenance")
                .set_library("seen_bloom")
                .set_function("seen_bloom_maintenance_worker")
                .set_argument(Some(pg_sys::Datum::from(database)))
                .enable_spi_access()
                .set_restart_time(None)
                // SAFETY: a plain read of this process's PID.
                .set_notify_pid(unsafe { pg_sys::MyProcPid })
                .load_dynamic();
                match started {
                    Ok(worker) => {
                        workers.insert(database, worker);
                    }
                    // max_worker_processes reached: the next round tries again.
                    Err(_) => {
                        pgrx::log!(
                            "seen_bloom maintenance: no background worker slot for database {database} (max_worker_processes)"
                        );
                        break;
                    }
                }
            }
        }
        // Until the next round: the latch also wakes when a worker starts or exits (we are
        // its notify_pid), and a round started then would start the worker that just ended
        // again, at once (100% of a core in the first measurement).
        let next_round = Instant::now() + Duration::from_secs(NAPTIME_SECONDS.get().max(1) as u64);
        let mut alive = true;
        while alive {
            let left = next_round.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            alive = BackgroundWorker::wait_latch(Some(left));
            reload_if_asked();
        }
        if !alive {
            break;
        }
    }
    // Exit code 1: the postmaster starts the launcher again after 10 s (pg_terminate_backend
    // of it is not a way to turn maintenance off: seen_bloom.maintenance is). At shutdown it
    // starts nothing.
    // SAFETY: ends this process as any backend does.
    unsafe { pg_sys::proc_exit(1) };
}

// utils/timeout.h, not in pgrx's bindings: STATEMENT_TIMEOUT is the fourth TimeoutId in
// PostgreSQL 13 to 18. die is postgres.c's SIGTERM handler (pgrx binds it as a Rust function,
// a signal handler needs the C symbol).
const STATEMENT_TIMEOUT: i32 = 3;
unsafe extern "C-unwind" {
    fn enable_timeout_after(id: i32, delay_ms: i32);
    fn disable_timeout(id: i32, keep_indicator: bool);
    fn die(signal: std::ffi::c_int);
}

/// Runs `seen_bloom._maintain(table, step, arg)` in a transaction of its own, under
/// `statement_timeout` (a backend's main loop arms it for each statement; a worker must do so
/// itself), and returns its answer.
fn step(table: u32, step: &str, arg: Option<&str>) -> Option<String> {
    let sql = format!("SELECT seen_bloom._maintain($1::pg_catalog.regclass, '{step}', $2)");
    // Shown in pg_stat_activity.query while it runs.
    let shown = CString::new(format!("{sql} -- table {table}")).expect("no NUL in the SQL");
    // SAFETY: copies the string into this backend's status entry.
    unsafe { pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_RUNNING, shown.as_ptr()) };
    let result = BackgroundWorker::transaction(|| {
        // SAFETY: a plain read of the GUC's variable.
        let timeout = unsafe { pg_sys::StatementTimeout };
        if timeout > 0 {
            // SAFETY: STATEMENT_TIMEOUT's handler is registered in every backend (InitPostgres).
            unsafe { enable_timeout_after(STATEMENT_TIMEOUT, timeout) };
        }
        let args = [
            pgrx::datum::DatumWithOid::from(pg_sys::Oid::from(table)),
            pgrx::datum::DatumWithOid::from(arg),
        ];
        let result = Spi::get_one_with_args::<String>(&sql, &args).unwrap_or(None);
        if timeout > 0 {
            // SAFETY: as above.
            unsafe { disable_timeout(STATEMENT_TIMEOUT, false) };
        }
        result
    });
    // SAFETY: as above.
    unsafe { pg_sys::pgstat_report_activity(pg_sys::BackendState::STATE_IDLE, std::ptr::null()) };
    result
}

/// # Safety
/// Called by the postmaster only, as a worker's entry point, with a database's OID.
#[pg_guard]
#[unsafe(no_mangle)]
pub unsafe extern "C-unwind" fn seen_bloom_maintenance_worker(arg: pg_sys::Datum) {
    // SIGTERM (shutdown, pg_terminate_backend, DROP DATABASE ... WITH (FORCE)) ends the worker
    // at its next interrupt check, mid-statement too, as for a backend: PostgreSQL's die().
    // SAFETY: installs a handler of PostgreSQL's signal handler type before signals are
    // unblocked (attach_signal_handlers unblocks them).
    unsafe {
        #[cfg(not(feature = "pg18"))]
        pg_sys::pqsignal(pg_sys::SIGTERM as i32, Some(die));
        #[cfg(feature = "pg18")]
        pg_sys::pqsignal_be(pg_sys::SIGTERM as i32, Some(die));
    }
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP);
    let database = pg_sys::Oid::from(arg.value() as u32);
    BackgroundWorker::connect_worker_to_spi_by_oid(Some(database), None);
    // The tables due, none where seen_bloom (0.5.0 or later) is not installed.
    let due: Vec<u32> = BackgroundWorker::transaction(|| {
        let installed = Spi::get_one::<bool>(
            "SELECT pg_catalog.to_regprocedure('seen_bloom._maintenance_due()') IS NOT NULL",
        )
        .unwrap_or(None)
        .unwrap_or(false);
        if !installed {
            return Vec::new();
        }
        oids("SELECT t::pg_catalog.oid FROM seen_bloom._maintenance_due() t")
    });
    for table in due {
        reload_if_asked();
        if step(table, "begin", None).as_deref() != Some("begun") {
            continue; // a manual run holds the table, or it is no longer tracked
        }
        step(table, "expire", None);
        // The batches of users to compact, one a line (users as a JSON array each).
        let batches = step(table, "batches", None);
        for batch in batches.as_deref().unwrap_or("").lines() {
            step(table, "compact", Some(batch));
        }
        step(table, "end", None);
    }
}
