//! Who a tracked table's work runs as: its owner. The fold, the `where` predicate and the
//! casts in it, the generated functions and triggers, and every maintenance step of a table
//! run as the table's owner, under `SECURITY_RESTRICTED_OPERATION` with the search_path
//! pinned, as VACUUM, ANALYZE and REINDEX run a table's index expressions. Asking for it
//! takes the owner's privileges (membership with inheritance, as ALTER TABLE asks), so no
//! role gains a right through seen_bloom (docs/SECURITY.md, "The rule").
//!
//! `seen_bloom.tracked`, which says what the extension drops, writes and reads, is written
//! only here (`_write_tracked`), after the same check, as the extension's owner.

use crate::pg::catalog::{owner, qualified_name};
use crate::pg::spi::Connection;
use crate::pg::v1::v1_function;
use pgrx::{ereport, pg_sys, PgSqlErrorCode};

/// The search_path the owner's work runs with (PostgreSQL 17's for VACUUM and REINDEX).
const PINNED_SEARCH_PATH: &std::ffi::CStr = c"pg_catalog, pg_temp";

/// Whether the current user may act as `role` outright, as `SET ROLE` would let it: running
/// statements as a role carries its attributes (SUPERUSER, CREATEROLE, BYPASSRLS), which
/// inheriting its privileges does not. Since PostgreSQL 16 a membership may inherit without
/// SET; before, every membership allows SET ROLE.
pub fn may_act_as(role: pg_sys::Oid) -> bool {
    // SAFETY: catalog checks of two role OIDs.
    unsafe {
        let me = pg_sys::GetUserId();
        if pg_sys::superuser() || me == role {
            return true;
        }
        #[cfg(any(feature = "pg16", feature = "pg17", feature = "pg18"))]
        let can_set = pg_sys::member_can_set_role(me, role);
        #[cfg(not(any(feature = "pg16", feature = "pg17", feature = "pg18")))]
        let can_set = pg_sys::is_member_of_role(me, role);
        can_set && pg_sys::has_privs_of_role(me, role)
    }
}

/// Raises 42501 ("must be owner of table ...") unless the current user may act as `relid`'s
/// owner (see [`may_act_as`]).
pub fn require_owner(relid: pg_sys::Oid) {
    if may_act_as(owner(relid)) {
        return;
    }
    let name = qualified_name(relid);
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
        format!("must be owner of table {name}"),
        "seen_bloom acts for a table as its owner, so only its owner (or a member of the owning role) may ask it to."
    );
}

/// Runs `f` as `role` with the security context of a SECURITY DEFINER function that is also
/// restricted (no SET ROLE, no temporary objects, no cursors left open): what `f` runs can
/// never get back to the caller's rights. An error's (sub)transaction abort restores the
/// caller.
pub fn as_role<T>(role: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    let (mut caller, mut context) = (pg_sys::InvalidOid, 0);
    // SAFETY: reads and sets the backend's current user and security context.
    unsafe {
        pg_sys::GetUserIdAndSecContext(&mut caller, &mut context);
        pg_sys::SetUserIdAndSecContext(
            role,
            context
                | pg_sys::SECURITY_LOCAL_USERID_CHANGE as i32
                | pg_sys::SECURITY_RESTRICTED_OPERATION as i32,
        );
    }
    let result = f();
    // SAFETY: restores what was read above.
    unsafe { pg_sys::SetUserIdAndSecContext(caller, context) };
    result
}

/// [`as_role`] with the search_path pinned to `pg_catalog, pg_temp` for the duration, so that
/// no name in what `f` runs resolves to another role's object.
pub fn as_role_pinned<T>(role: pg_sys::Oid, f: impl FnOnce() -> T) -> T {
    // SAFETY: a GUC nest level that AtEOXact_GUC below (or the transaction's abort) unwinds;
    // set_config_option copies its NUL-terminated arguments.
    let level = unsafe {
        let level = pg_sys::NewGUCNestLevel();
        pg_sys::set_config_option(
            c"search_path".as_ptr(),
            PINNED_SEARCH_PATH.as_ptr(),
            pg_sys::GucContext::PGC_USERSET,
            pg_sys::GucSource::PGC_S_SESSION,
            pg_sys::GucAction::GUC_ACTION_SAVE,
            true,
            0,
            false,
        );
        level
    };
    let result = as_role(role, f);
    // SAFETY: unwinds the nest level made above, undoing every setting changed inside (as
    // VACUUM does): a plain SET run by the owner's code must not outlive it, or it would
    // steer what the caller runs next (a search_path naming the owner's operators).
    unsafe { pg_sys::AtEOXact_GUC(false, level) };
    result
}

/// A value of `type_oid` as a plain datum: a varlena (a composite or an array that PL/pgSQL
/// passes as an expanded object, or a toasted one) flattened into the call's memory. The
/// statement run with it may hand it to a PL/pgSQL function, which takes over an expanded
/// object passed to it: the caller's variable would then point at freed memory.
fn flat(type_oid: pg_sys::Oid, value: pg_sys::Datum) -> pg_sys::Datum {
    // SAFETY: a type cache lookup; a varlena datum of that type is detoasted (flattened)
    // into a palloc'd copy, or returned as it is when it is already plain.
    unsafe {
        if pg_sys::get_typlen(type_oid) == -1 {
            pg_sys::Datum::from(pg_sys::pg_detoast_datum_copy(value.cast_mut_ptr()))
        } else {
            value
        }
    }
}

/// Runs `sql` with SPI (with `arg` as $1 when given), returning the first column of the first
/// row as text, or the rows processed when the statement returns none.
fn run(sql: &str, arg: Option<(pg_sys::Oid, pg_sys::Datum)>) -> Option<String> {
    let conn = Connection::open();
    let (types, values): (Vec<_>, Vec<_>) = arg.into_iter().unzip();
    let plan = conn.prepare(sql, &types, false);
    let rows = conn.execute(plan, &values, false);
    if rows.has_columns() {
        (rows.len() > 0).then(|| rows.output(0, 1)).flatten()
    } else {
        Some(rows.processed().to_string())
    }
}

// seen_bloom._as_owner(rel regclass, sql text [, arg anyelement]) -> text: runs one statement
// as rel's owner (see as_role_pinned), for a caller with the owner's privileges (42501
// otherwise). The extension's procedures run a table's folds, predicate, DDL and maintenance
// through it. Returns the first column of the first row as text, or the rows processed.
v1_function!(
    seen_bloom__as_owner,
    pg_finfo_seen_bloom__as_owner,
    |args| {
        let (Some(rel), Some(sql)) = (args.regclass(0), args.bytes(1)) else {
            crate::pg::errors::null_argument("seen_bloom._as_owner: rel and sql must not be NULL");
        };
        let arg = match args.nargs() > 2 {
            true => match args.passed(2) {
                Some(value) => Some((args.arg_type(2), flat(args.arg_type(2), value))),
                None => {
                    crate::pg::errors::null_argument("seen_bloom._as_owner: arg must not be NULL")
                }
            },
            false => None,
        };
        let sql = String::from_utf8_lossy(sql).into_owned();
        require_owner(rel);
        match as_role_pinned(owner(rel), || run(&sql, arg)) {
            // SAFETY: copies the bytes into a palloc'd text of the call's memory context.
            Some(text) => unsafe {
                pg_sys::Datum::from(pg_sys::cstring_to_text_with_len(
                    text.as_ptr().cast(),
                    text.len() as i32,
                ))
            },
            None => args.return_null(),
        }
    }
);

// seen_bloom._check_owner(rel regclass) -> void: 42501 unless the caller holds the privileges
// of rel's owner (track, untrack and maintenance ask it first).
v1_function!(
    seen_bloom__check_owner,
    pg_finfo_seen_bloom__check_owner,
    |args| {
        let Some(rel) = args.regclass(0) else {
            crate::pg::errors::null_argument("seen_bloom: the table must not be NULL");
        };
        require_owner(rel);
        pg_sys::Datum::from(0usize)
    }
);

/// The OID of `seen_bloom.tracked`.
fn tracked_table() -> pg_sys::Oid {
    // SAFETY: catalog lookups by NUL-terminated names; a missing schema raises.
    unsafe {
        let schema = pg_sys::get_namespace_oid(c"seen_bloom".as_ptr(), false);
        pg_sys::get_relname_relid(c"tracked".as_ptr(), schema)
    }
}

/// Whether relation `relid` exists.
fn exists(relid: pg_sys::Oid) -> bool {
    // SAFETY: a syscache lookup by OID; 0 for a missing relation.
    unsafe { pg_sys::get_rel_relkind(relid) != 0 }
}

/// A configuration row may name only a filter table that is an ordinary table (not a view
/// or a foreign table, whose reads would run someone's code) owned by the tracked table's
/// owner: a fold writes it as that owner, and untrack drops it.
fn require_filter_table(impressions: pg_sys::Oid, filter_table: pg_sys::Oid) {
    // SAFETY: a syscache lookup by OID; 0 for a missing relation.
    let kind = unsafe { pg_sys::get_rel_relkind(filter_table) } as u8;
    if kind != pg_sys::RELKIND_RELATION || owner(filter_table) != owner(impressions) {
        ereport!(
            ERROR,
            PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
            format!(
                "{} cannot be the filter table of {}: a filter table is a table owned by the tracked table's owner",
                qualified_name(filter_table),
                qualified_name(impressions)
            )
        );
    }
}

const TRACKED_COLUMNS: &str = "filter_table, user_column, item_column, time_column, user_type, item_type, \"window\", \
     generations, generation_seconds, capacity, error_rate, error_rate_per_generation, \"where\", layout";

/// The columns an update of seen_bloom.tracked writes: user_cap too since 0.5.0 (a database
/// not yet updated has none).
fn tracked_columns(tracked: pg_sys::Oid) -> String {
    // SAFETY: a syscache lookup of a column by name (InvalidAttrNumber if none).
    let has_cap = unsafe { pg_sys::get_attnum(tracked, c"user_cap".as_ptr()) }
        != pg_sys::InvalidAttrNumber as i16;
    match has_cap {
        true => format!("{TRACKED_COLUMNS}, user_cap"),
        false => TRACKED_COLUMNS.to_string(),
    }
}

// seen_bloom._write_tracked(op text, t seen_bloom.tracked) -> void: the only writer of
// seen_bloom.tracked and of seen_bloom.retracking (the settings a retrack moves a table to,
// with the filter table it builds them in: ops 'insert next' and 'delete next').
// 'insert' and 'update' (the row of t.impressions, every column) ask for the privileges of
// t.impressions' owner and a filter table owned by that owner; 'delete' asks the same while
// the table exists (a dropped table's row may go by anyone's DROP).
v1_function!(
    seen_bloom__write_tracked,
    pg_finfo_seen_bloom__write_tracked,
    |args| {
        let (Some(op), Some(row)) = (args.bytes(0), args.passed(1)) else {
            crate::pg::errors::null_argument(
                "seen_bloom._write_tracked: op and t must not be NULL",
            );
        };
        let tracked = tracked_table();
        // SAFETY: a syscache lookup of the table's row type.
        let row_type = unsafe { pg_sys::get_rel_type_id(tracked) };
        // SAFETY: `row` is a non-null composite of seen_bloom.tracked (the declared argument
        // type), maybe toasted or an expanded record (PL/pgSQL passes those):
        // pg_detoast_datum_copy gives a flat tuple of our own, in the call's memory context.
        let tuple = unsafe { pg_sys::pg_detoast_datum_copy(row.cast_mut_ptr()) }
            as *mut pg_sys::HeapTupleHeaderData;
        let field = |name: &std::ffi::CStr| {
            let mut isnull = false;
            // SAFETY: a flat composite tuple (above); the field is found by name.
            let value = unsafe { pg_sys::GetAttributeByName(tuple, name.as_ptr(), &mut isnull) };
            (!isnull).then(|| pg_sys::Oid::from(value.value() as u32))
        };
        let Some(impressions) = field(c"impressions") else {
            crate::pg::errors::null_argument(
                "seen_bloom._write_tracked: t.impressions must not be NULL",
            );
        };
        let op = String::from_utf8_lossy(op);
        let (op, table) = match op.strip_suffix(" next") {
            Some(op) => (
                std::borrow::Cow::Owned(op.to_string()),
                "seen_bloom.retracking",
            ),
            None => (op, "seen_bloom.tracked"),
        };
        let sql = match op.as_ref() {
            "update" if table != "seen_bloom.tracked" => crate::pg::errors::bad_argument(
                "seen_bloom._write_tracked: a retrack's row is inserted and deleted, not updated"
                    .to_string(),
            ),
            "insert" | "update" => {
                require_owner(impressions);
                let Some(filter_table) = field(c"filter_table") else {
                    crate::pg::errors::null_argument(
                        "seen_bloom._write_tracked: t.filter_table must not be NULL",
                    );
                };
                require_filter_table(impressions, filter_table);
                let columns = tracked_columns(tracked);
                if op == "insert" {
                    format!("INSERT INTO {table} SELECT ($1::seen_bloom.tracked).*")
                } else {
                    format!(
                        "UPDATE seen_bloom.tracked x SET ({columns}) = (SELECT {columns} FROM (SELECT ($1::seen_bloom.tracked).*) r)
                          WHERE x.impressions OPERATOR(pg_catalog.=) ($1::seen_bloom.tracked).impressions"
                    )
                }
            }
            "delete" => {
                if exists(impressions) {
                    require_owner(impressions);
                }
                format!(
                    "DELETE FROM {table} x
                      WHERE x.impressions OPERATOR(pg_catalog.=) ($1::seen_bloom.tracked).impressions"
                )
            }
            _ => crate::pg::errors::bad_argument(format!(
                "seen_bloom._write_tracked: op must be insert, update or delete, got {op}"
            )),
        };
        let flat = pg_sys::Datum::from(tuple);
        as_role_pinned(owner(tracked), || run(&sql, Some((row_type, flat))));
        pg_sys::Datum::from(0usize)
    }
);

/// The owner of function `proc` (42883 when it does not exist).
fn function_owner(proc: pg_sys::Oid) -> pg_sys::Oid {
    // SAFETY: a syscache lookup by OID; the tuple is checked for validity, read as the
    // pg_proc row it is, and released.
    unsafe {
        let tuple = pg_sys::SearchSysCache1(
            pg_sys::SysCacheIdentifier::PROCOID as i32,
            pg_sys::Datum::from(proc),
        );
        if tuple.is_null() {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_UNDEFINED_FUNCTION,
                format!("function with OID {} does not exist", proc.to_u32())
            );
        }
        let form = pg_sys::heap_tuple_get_struct::<pg_sys::FormData_pg_proc>(tuple);
        let owner = (*form).proowner;
        pg_sys::ReleaseSysCache(tuple);
        owner
    }
}

/// Records in pg_depend that object (class, oid) depends on object (class, oid), with `kind`.
/// The callers have looked both objects up (their owners, or the extension by name), so both
/// exist.
fn record_dependency(
    dependent: (pg_sys::Oid, pg_sys::Oid),
    referenced: (pg_sys::Oid, pg_sys::Oid),
    kind: pg_sys::DependencyType::Type,
) {
    let address = |(class, oid)| pg_sys::ObjectAddress {
        classId: class,
        objectId: oid,
        objectSubId: 0,
    };
    // SAFETY: two addresses of existing objects (see above); recordDependencyOn copies them.
    unsafe { pg_sys::recordDependencyOn(&address(dependent), &address(referenced), kind) };
}

// seen_bloom._depend_on_extension(filter_table regclass) -> void: records that a filter table
// depends on the extension (a NORMAL dependency: DROP EXTENSION refuses while one exists, and
// DROP EXTENSION ... CASCADE drops it, with the generated functions linked to it and the
// triggers that call them, rather than leaving them to fail every INSERT). Not a membership:
// pg_dump keeps dumping the table. Only for a caller who may act as the table's owner.
v1_function!(
    seen_bloom__depend_on_extension,
    pg_finfo_seen_bloom__depend_on_extension,
    |args| {
        let Some(filter_table) = args.regclass(0) else {
            crate::pg::errors::null_argument(
                "seen_bloom._depend_on_extension: filter_table must not be NULL",
            );
        };
        require_owner(filter_table);
        // SAFETY: a catalog lookup by a NUL-terminated name (missing_ok = false raises).
        let extension = unsafe { pg_sys::get_extension_oid(c"seen_bloom".as_ptr(), false) };
        record_dependency(
            (pg_sys::RelationRelationId, filter_table),
            (pg_sys::ExtensionRelationId, extension),
            pg_sys::DependencyType::DEPENDENCY_NORMAL,
        );
        pg_sys::Datum::from(0usize)
    }
);

// seen_bloom._depend_on(dependent_class regclass, dependent oid, referenced regclass) -> void:
// records that a relation or function (pg_class or pg_proc) made for a tracked table goes
// with `referenced` (an AUTO dependency: dropped with it, or alone): the filter table with
// the tracked table, the generated functions with the filter table. PostgreSQL then drops
// them itself, and untrack finds them here rather than by name. Only for a caller who may act
// as the owners of both: a link makes a DROP of `referenced` drop the dependent.
v1_function!(
    seen_bloom__depend_on,
    pg_finfo_seen_bloom__depend_on,
    |args| {
        let (Some(class), Some(dependent), Some(referenced)) =
            (args.regclass(0), args.regclass(1), args.regclass(2))
        else {
            crate::pg::errors::null_argument("seen_bloom._depend_on: no argument may be NULL");
        };
        let dependent_owner = match class {
            pg_sys::RelationRelationId => owner(dependent),
            pg_sys::ProcedureRelationId => function_owner(dependent),
            _ => crate::pg::errors::bad_argument(format!(
                "seen_bloom._depend_on: a relation or a function, not an object of catalog {}",
                class.to_u32()
            )),
        };
        require_owner(referenced);
        if !may_act_as(dependent_owner) {
            ereport!(
                ERROR,
                PgSqlErrorCode::ERRCODE_INSUFFICIENT_PRIVILEGE,
                "seen_bloom._depend_on: must be the owner of the dependent object"
            );
        }
        record_dependency(
            (class, dependent),
            (pg_sys::RelationRelationId, referenced),
            pg_sys::DependencyType::DEPENDENCY_AUTO,
        );
        pg_sys::Datum::from(0usize)
    }
);
