//! The `where` predicate of `seen_bloom.track`: SQL text that the generated fold statements
//! paste between parentheses, so it must be one expression that cannot close them or end the
//! statement. `seen_bloom._check_predicate(predicate [, impressions])` refuses anything else
//! (42601) and, given the table, checks that it still names the table's columns (42703 and
//! the like from parse analysis) without planning or running it: the DDL event trigger calls
//! it as the extension's owner, and a predicate's functions must not run with those rights.

use crate::pg::spi::Connection;
use crate::pg::v1::v1_function;
use pgrx::{ereport, pg_sys, PgSqlErrorCode};

/// Why a predicate cannot be pasted between parentheses, or None when it can: parentheses
/// outside quotes and comments must balance without closing early, and nothing may end the
/// statement (`;`) or comment out what follows (`--` reaching the end, an open `/*`), with
/// quotes (`'...'`, `E'...'`, `"..."`, `$tag$...$tag$`) read as PostgreSQL's lexer reads them.
pub fn paste_problem(predicate: &str) -> Option<&'static str> {
    let b = predicate.as_bytes();
    let mut depth: i64 = 0;
    let mut i = 0;
    while i < b.len() {
        // Each arm leaves `i` on the last byte of what it read.
        let skipped = match b[i] {
            b'(' => {
                depth += 1;
                Ok(i)
            }
            b')' => {
                depth -= 1;
                if depth < 0 {
                    return Some("it closes a parenthesis it did not open");
                }
                Ok(i)
            }
            b';' => return Some("it contains a semicolon outside quotes"),
            b'-' if b.get(i + 1) == Some(&b'-') => match b[i..].iter().position(|&x| x == b'\n') {
                Some(end) => Ok(i + end),
                None => return Some("it ends inside a -- comment"),
            },
            b'/' if b.get(i + 1) == Some(&b'*') => block_comment_end(b, i),
            // E'...' (an E right before, not ending an identifier) allows backslash escapes.
            b'\'' => {
                let escapes =
                    i >= 1 && matches!(b[i - 1], b'E' | b'e') && (i < 2 || !ident(b[i - 2]));
                quoted_end(b, i, escapes).ok_or("it ends inside a quoted string")
            }
            b'"' => quoted_end(b, i, false).ok_or("it ends inside a quoted identifier"),
            b'$' if i == 0 || !ident(b[i - 1]) => dollar_quote_end(b, i),
            _ => Ok(i),
        };
        match skipped {
            Ok(last) => i = last + 1,
            Err(why) => return Some(why),
        }
    }
    (depth != 0).then_some("its parentheses do not balance")
}

/// Whether `c` may be part of an identifier.
fn ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80
}

/// The last byte of the block comment opening at `b[i]` (they nest in PostgreSQL).
fn block_comment_end(b: &[u8], mut i: usize) -> Result<usize, &'static str> {
    let mut nest = 1;
    i += 2;
    while nest > 0 {
        match (b.get(i), b.get(i + 1)) {
            (None, _) => return Err("it ends inside a /* comment"),
            (Some(b'/'), Some(b'*')) => (nest, i) = (nest + 1, i + 2),
            (Some(b'*'), Some(b'/')) => (nest, i) = (nest - 1, i + 2),
            _ => i += 1,
        }
    }
    Ok(i - 1)
}

/// The closing quote of the string or identifier quoted by `b[i]` (doubled quotes inside;
/// backslash escapes with `escapes`), None when it does not close.
fn quoted_end(b: &[u8], mut i: usize, escapes: bool) -> Option<usize> {
    let quote = b[i];
    i += 1;
    loop {
        match b.get(i) {
            None => return None,
            Some(b'\\') if escapes => i += 2,
            Some(&c) if c == quote && b.get(i + 1) == Some(&quote) => i += 2,
            Some(&c) if c == quote => return Some(i),
            _ => i += 1,
        }
    }
}

/// The last byte of the dollar quote opening at `b[i]`, if `$tag$` opens one there (the tag
/// empty or an identifier; `$1` is a parameter), else `i`.
fn dollar_quote_end(b: &[u8], i: usize) -> Result<usize, &'static str> {
    let tag_len = b[i + 1..]
        .iter()
        .position(|&x| !ident(x))
        .unwrap_or(b.len() - i - 1);
    let tag_ok =
        b.get(i + 1 + tag_len) == Some(&b'$') && (tag_len == 0 || !b[i + 1].is_ascii_digit());
    if !tag_ok {
        return Ok(i);
    }
    let delimiter = &b[i..i + tag_len + 2];
    let body = i + tag_len + 2;
    match b[body..]
        .windows(delimiter.len())
        .position(|w| w == delimiter)
    {
        Some(end) => Ok(body + end + delimiter.len() - 1),
        None => Err("it ends inside a dollar-quoted string"),
    }
}

fn refuse(predicate: &str, why: &str) -> ! {
    ereport!(
        ERROR,
        PgSqlErrorCode::ERRCODE_SYNTAX_ERROR,
        format!(
            "the where predicate must be a single boolean expression ({why}), got: {predicate}"
        )
    );
}

/// Whether `sql` parses as exactly one statement (the raw parser only: no catalog access).
fn one_statement(sql: &std::ffi::CStr) -> bool {
    // SAFETY: raw_parser reads a NUL-terminated string and returns a palloc'd List or NULL.
    unsafe {
        // PostgreSQL 13's raw_parser has no mode argument (14 added RawParseMode).
        #[cfg(feature = "pg13")]
        let statements = pg_sys::raw_parser(sql.as_ptr());
        #[cfg(not(feature = "pg13"))]
        let statements = pg_sys::raw_parser(sql.as_ptr(), pg_sys::RawParseMode::RAW_PARSE_DEFAULT);
        !statements.is_null() && (*statements).length == 1
    }
}

/// Whether `sql` passes parse analysis (SPI_prepare neither plans nor runs it: column names
/// and types are checked, no function of it is called).
fn parses_against_tables(sql: &std::ffi::CStr) -> bool {
    let _conn = Connection::open();
    // SAFETY: SPI is connected; SPI_prepare reads a NUL-terminated string.
    !unsafe { pg_sys::SPI_prepare(sql.as_ptr(), 0, std::ptr::null_mut()) }.is_null()
}

// seen_bloom._check_predicate(predicate text [, impressions regclass]) -> boolean
v1_function!(
    seen_bloom__check_predicate,
    pg_finfo_seen_bloom__check_predicate,
    |args| {
        let predicate = String::from_utf8_lossy(args.bytes(0).unwrap()).into_owned();
        if let Some(why) = paste_problem(&predicate) {
            refuse(&predicate, why);
        }
        let probe = std::ffi::CString::new(format!("SELECT 1 WHERE ({predicate})"))
            .unwrap_or_else(|_| refuse(&predicate, "it contains a NUL byte"));
        if !one_statement(&probe) {
            refuse(&predicate, "it is not one expression");
        }
        if let Some(impressions) = (args.nargs() > 1).then(|| args.regclass(1)).flatten() {
            let table = crate::pg::catalog::qualified_name(impressions);
            let sql =
                std::ffi::CString::new(format!("SELECT 1 FROM {table} n WHERE ({predicate})"))
                    .unwrap_or_else(|_| refuse(&predicate, "it contains a NUL byte"));
            if !parses_against_tables(&sql) {
                refuse(&predicate, "it does not parse against the table");
            }
        }
        pg_sys::Datum::from(true)
    }
);

#[cfg(test)]
mod tests {
    use super::paste_problem;

    #[test]
    fn expressions_paste() {
        for ok in [
            "watch_pct >= 0.5",
            "kind = 'a;b'",
            "kind = 'it''s ) here'",
            "kind = E'\\' ; )'",
            "\"odd;col\" > 0",
            "kind = $$;)$$",
            "kind = $x$ ) $$ ; $x$",
            "f(a, (b))",
            "a > 1 -- note\n",
            "a /* ; ( /* nested ) */ */ > 1",
            "a$b > $1",
        ] {
            assert_eq!(paste_problem(ok), None, "{ok}");
        }
    }

    #[test]
    fn breakouts_are_refused() {
        for bad in [
            "true) OR (true",
            "true); DROP TABLE x; SELECT (1",
            "a > 1; SELECT 1",
            "a > 1 --",
            "a > 1 /* open",
            "kind = 'open",
            "kind = \"open",
            "kind = $$ open",
            "(a > 1",
            "a > 1)",
        ] {
            assert!(paste_problem(bad).is_some(), "{bad}");
        }
    }
}
