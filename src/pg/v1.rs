//! Declares PostgreSQL "version 1" C functions without pgrx's SQL generation: the SQL
//! declarations live in `sql/seen_bloom.sql` and `sql/tracking.sql`, so each Rust function
//! only needs its `pg_finfo_*` record and a panic guard that turns Rust panics into
//! PostgreSQL errors. A C symbol is its SQL function's name (`seen_bloom.unseen` is
//! `seen_bloom_unseen`), with the item type as a suffix where one SQL name has overloads.

/// `v1_function!(symbol, pg_finfo_symbol, |args| body)` exports `symbol` as a V1 function
/// whose body is safe code reading its arguments through `args: &Args` (see pg::args).
macro_rules! v1_function {
    ($name:ident, $finfo:ident, |$args:ident| $body:block) => {
        $crate::pg::v1::v1_finfo!($finfo);

        /// # Safety
        /// Called by fmgr only, with the live call's `fcinfo`.
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub unsafe extern "C-unwind" fn $name(
            fcinfo: ::pgrx::pg_sys::FunctionCallInfo,
        ) -> ::pgrx::pg_sys::Datum {
            fn body($args: &$crate::pg::args::Args) -> ::pgrx::pg_sys::Datum $body
            // SAFETY: fmgr calls this with the live call's fcinfo, for this symbol (the
            // pg_finfo record says version 1); the guard turns a panic into an ERROR before
            // it could unwind into C.
            unsafe {
                ::pgrx::pg_sys::submodules::panic::pgrx_extern_c_guard(|| {
                    body(&$crate::pg::args::Args::new(fcinfo, stringify!($name)))
                })
            }
        }
    };
}
pub(crate) use v1_function;

/// `v1_finfo!(pg_finfo_symbol)`: the record that tells fmgr `symbol` is a version-1 function.
macro_rules! v1_finfo {
    ($finfo:ident) => {
        #[unsafe(no_mangle)]
        #[doc(hidden)]
        pub extern "C" fn $finfo() -> &'static ::pgrx::pg_sys::Pg_finfo_record {
            static V1: ::pgrx::pg_sys::Pg_finfo_record =
                ::pgrx::pg_sys::Pg_finfo_record { api_version: 1 };
            &V1
        }
    };
}
pub(crate) use v1_finfo;
