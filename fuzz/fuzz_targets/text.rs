//! Untrusted text into the text-form parser (`bloom_in`), then into the byte parser; and any
//! bytes through the text form and back.
#![no_main]

use bloom_core::{from_text, to_text, BloomView};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Round trip of arbitrary bytes through the text form.
    let text = to_text(data);
    assert_eq!(from_text(&text).as_deref(), Ok(data));

    // Arbitrary text (bloom_in gets a C string, which PostgreSQL has checked for encoding).
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(bytes) = from_text(s) {
        // Accepted text is `\x` and hex: its canonical form is the lower-case input.
        assert_eq!(to_text(&bytes), s.to_ascii_lowercase());
        if let Ok(view) = BloomView::parse_validated(&bytes) {
            let _ = view.info();
            let _ = view.contains_hash(bytes.len() as u64);
        }
    }
});
