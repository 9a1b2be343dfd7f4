//! `seen_bloom.default_capacity` and `seen_bloom.default_error_rate`: the shape a filter gets
//! when none is given (`bloom_empty()` without arguments, `bloom_add(NULL, x)`, `bloom_agg(x)`);
//! `seen_bloom.in_place_memory`: how many bytes of layer rows a transaction holds for its
//! writes at commit (layout 3, see in_place).

use bloom_core::{Shape, MAX_CAPACITY};
use pgrx::{GucContext, GucFlags, GucRegistry, GucSetting};

pub static DEFAULT_CAPACITY: GucSetting<i32> = GucSetting::<i32>::new(100_000);
pub static DEFAULT_ERROR_RATE: GucSetting<f64> = GucSetting::<f64>::new(0.01);
/// In kB: 64 MB holds about 43,000 layer rows.
pub const IN_PLACE_MEMORY_DEFAULT_KB: i32 = 64 * 1024;
pub static IN_PLACE_MEMORY_KB: GucSetting<i32> = GucSetting::<i32>::new(IN_PLACE_MEMORY_DEFAULT_KB);

pub fn register() {
    GucRegistry::define_int_guc(
        c"seen_bloom.default_capacity",
        c"Items a new bloom filter is sized for when no capacity is given.",
        c"Used by bloom_empty(), bloom_add(NULL, ...) and bloom_agg(item).",
        &DEFAULT_CAPACITY,
        1,
        MAX_CAPACITY as i32,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_float_guc(
        c"seen_bloom.default_error_rate",
        c"Target false-positive rate of a new bloom filter when none is given.",
        c"Must lie strictly between 0 and 1.",
        &DEFAULT_ERROR_RATE,
        1e-12,
        0.999_999,
        GucContext::Userset,
        GucFlags::default(),
    );
    GucRegistry::define_int_guc(
        c"seen_bloom.in_place_memory",
        c"Bytes of layer rows a transaction holds to write in place at commit (layout 3).",
        c"Past it, its folds write new row versions, as layout 2 does; 0 writes no row in place.",
        &IN_PLACE_MEMORY_KB,
        0,
        i32::MAX / 1024,
        GucContext::Userset,
        GucFlags::UNIT_KB,
    );
}

/// Whether the library is being loaded from shared_preload_libraries (in the postmaster):
/// only then may it reserve shared memory, register workers and WAL resource managers.
pub fn preloading() -> bool {
    // SAFETY: a flag PostgreSQL sets while it loads shared_preload_libraries.
    unsafe { pgrx::pg_sys::process_shared_preload_libraries_in_progress }
}

/// The context of a setting read at server start (by a preloaded library): PGC_POSTMASTER
/// while shared_preload_libraries loads. A library loaded later may not define such a setting
/// (FATAL), and has nothing that would read it: there it is a superuser's, and inert.
pub fn server_start_context() -> GucContext {
    if preloading() {
        GucContext::Postmaster
    } else {
        GucContext::Suset
    }
}

/// The default shape, a scaling filter.
pub fn default_shape() -> Shape {
    Shape {
        capacity: DEFAULT_CAPACITY.get() as u64,
        error_rate: DEFAULT_ERROR_RATE.get(),
        scaling: true,
    }
}
