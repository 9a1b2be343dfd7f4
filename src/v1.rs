//! Declares PostgreSQL "version 1" C functions without pgrx's SQL generation: the SQL
//! declarations live in `sql/seen_bloom.sql`, so each Rust function only needs its
//! `pg_finfo_*` record and a panic guard that turns Rust panics into PostgreSQL errors.

/// `v1_function!(name, pg_finfo_name, |fcinfo| body)` exports `name` as a V1 function.
macro_rules! v1_function {
    ($name:ident, $finfo:ident, |$fcinfo:ident| $body:block) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            static V1: ::pgrx::pg_sys::Pg_finfo_record =
                ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }

        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub unsafe extern "C-unwind" fn $name(
            $fcinfo: ::pgrx::pg_sys::FunctionCallInfo,
        ) -> ::pgrx::pg_sys::Datum {
            unsafe { ::pgrx::pg_sys::submodules::panic::pgrx_extern_c_guard(|| $body) }
        }
    };
}
pub(crate) use v1_function;

use pgrx::pg_sys;

/// The raw datum of argument `n`, or `None` when it is NULL.
///
/// # Safety
/// `fcinfo` must be the live call's, with at least `n + 1` arguments.
pub unsafe fn arg(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> Option<pg_sys::Datum> {
    unsafe {
        let args = (*fcinfo).args.as_slice((*fcinfo).nargs as usize);
        let a = &args[n];
        if a.isnull {
            None
        } else {
            Some(a.value)
        }
    }
}

/// Marks the result NULL.
///
/// # Safety
/// `fcinfo` must be the live call's.
pub unsafe fn return_null(fcinfo: pg_sys::FunctionCallInfo) -> pg_sys::Datum {
    unsafe {
        (*fcinfo).isnull = true;
    }
    pg_sys::Datum::from(0usize)
}

/// The type of argument `n`: the actual type of the call's expression (which resolves
/// polymorphic arguments), or, for a call without one (DirectFunctionCall, a trigger), the
/// type the function's SQL declaration gives it. InvalidOid for a polymorphic argument of a
/// call without an expression.
///
/// # Safety
/// `fcinfo` must be the live call's.
pub unsafe fn arg_type(fcinfo: pg_sys::FunctionCallInfo, n: usize) -> pg_sys::Oid {
    // SAFETY: fcinfo is the live call's (the contract above); get_func_signature returns a
    // palloc'd array of `nargs` OIDs, read only below `nargs`.
    unsafe {
        let flinfo = (*fcinfo).flinfo;
        if flinfo.is_null() {
            return pg_sys::InvalidOid;
        }
        let actual = pg_sys::get_fn_expr_argtype(flinfo, n as i32);
        if actual != pg_sys::InvalidOid {
            return actual;
        }
        let mut declared: *mut pg_sys::Oid = std::ptr::null_mut();
        let mut nargs = 0;
        pg_sys::get_func_signature((*flinfo).fn_oid, &mut declared, &mut nargs);
        if n >= nargs as usize {
            return pg_sys::InvalidOid;
        }
        let oid = *declared.add(n);
        match oid {
            pg_sys::ANYELEMENTOID | pg_sys::ANYARRAYOID => pg_sys::InvalidOid,
            _ => oid,
        }
    }
}
