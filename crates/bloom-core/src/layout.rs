//! The byte layout of FORMAT.md: constants, the value header and the layer header, with a
//! bounds-checked reader. Knows nothing about what the fields mean beyond their codes.

use crate::error::Error;

pub(crate) const MAGIC: [u8; 4] = *b"SBLM";
/// The newest format version, written by every value that records its item family
/// (family.rs); version 1 values are still read, and written back as version 1.
pub(crate) const FORMAT_VERSION: u8 = 2;
pub(crate) const HEADER_BYTES: usize = 40;
pub(crate) const LAYER_HEADER_BYTES: usize = 32;
/// Largest layer count of a split-block value.
pub(crate) const MAX_LAYERS: u32 = 64;
pub(crate) const FLAG_SCALING: u8 = 1;

const CODE_EXACT: u8 = 1;
const CODE_SPLIT_BLOCK: u8 = 2;

/// How a value stores its items.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Representation {
    /// The sorted item hashes themselves: no false positives while the filter is small.
    Exact,
    /// One or more split-block Bloom filter layers.
    SplitBlock,
}

impl Representation {
    pub(crate) fn code(self) -> u8 {
        match self {
            Representation::Exact => CODE_EXACT,
            Representation::SplitBlock => CODE_SPLIT_BLOCK,
        }
    }

    fn from_code(code: u8) -> Option<Representation> {
        match code {
            CODE_EXACT => Some(Representation::Exact),
            CODE_SPLIT_BLOCK => Some(Representation::SplitBlock),
            _ => None,
        }
    }

    /// The name used by `bloom_info` and in messages.
    pub fn name(self) -> &'static str {
        match self {
            Representation::Exact => "exact",
            Representation::SplitBlock => "split_block",
        }
    }
}

/// The 40-byte value header, decoded but not yet checked for ranges.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Header {
    pub version: u8,
    pub hash_algorithm: u8,
    pub representation: Representation,
    pub flags: u8,
    pub seed: u32,
    pub layers: u32,
    pub capacity: u64,
    pub error_rate: f64,
    pub items: u64,
}

impl Header {
    /// Decodes the header; fails only on a short value, a wrong magic or an unknown
    /// representation code (the rest is judged by the parser, which knows the rules).
    pub fn read(bytes: &[u8]) -> Result<Header, Error> {
        let mut r = Reader::new(bytes);
        let magic = r.array::<4>("magic")?;
        if magic != MAGIC {
            return Err(Error::Malformed(format!(
                "not a bloom filter: expected magic \"SBLM\", found {magic:02x?}"
            )));
        }
        let version = r.u8("format version")?;
        let hash_algorithm = r.u8("hash algorithm")?;
        let code = r.u8("representation")?;
        let representation = Representation::from_code(code)
            .ok_or_else(|| Error::Malformed(format!("unknown representation code {code}")))?;
        Ok(Header {
            version,
            hash_algorithm,
            representation,
            flags: r.u8("flags")?,
            seed: r.u32("hash seed")?,
            layers: r.u32("layer count")?,
            capacity: r.u64("capacity")?,
            error_rate: r.f64("error rate")?,
            items: r.u64("items")?,
        })
    }

    pub fn write(&self, out: &mut [u8; HEADER_BYTES]) {
        let mut w = Writer::new(out);
        w.put(&MAGIC);
        w.put(&[
            self.version,
            self.hash_algorithm,
            self.representation.code(),
            self.flags,
        ]);
        w.put(&self.seed.to_le_bytes());
        w.put(&self.layers.to_le_bytes());
        w.put(&self.capacity.to_le_bytes());
        w.put(&self.error_rate.to_le_bytes());
        w.put(&self.items.to_le_bytes());
    }
}

/// The 32-byte header in front of each split-block layer's blocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct LayerHeader {
    pub capacity: u64,
    pub error_rate: f64,
    pub items: u64,
    pub blocks: u64,
}

impl LayerHeader {
    /// Decodes a layer header; infallible (and allocation-free) so the probe path can use it.
    pub fn decode(bytes: &[u8; LAYER_HEADER_BYTES]) -> LayerHeader {
        let (words, _) = bytes.as_chunks::<8>();
        let word = |i: usize| u64::from_le_bytes(words[i]);
        LayerHeader {
            capacity: word(0),
            error_rate: f64::from_bits(word(1)),
            items: word(2),
            blocks: word(3),
        }
    }

    pub fn write(&self, out: &mut [u8; LAYER_HEADER_BYTES]) {
        let mut w = Writer::new(out);
        w.put(&self.capacity.to_le_bytes());
        w.put(&self.error_rate.to_le_bytes());
        w.put(&self.items.to_le_bytes());
        w.put(&self.blocks.to_le_bytes());
    }
}

/// Reads little-endian fields front to back; running out of bytes is a `Malformed` error
/// naming the field, never a panic.
struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8]) -> Self {
        Reader { rest: bytes }
    }

    fn array<const N: usize>(&mut self, field: &str) -> Result<[u8; N], Error> {
        let (head, rest) = self
            .rest
            .split_first_chunk::<N>()
            .ok_or_else(|| Error::Malformed(format!("value ends before its {field} field")))?;
        self.rest = rest;
        Ok(*head)
    }

    fn u8(&mut self, field: &str) -> Result<u8, Error> {
        Ok(self.array::<1>(field)?[0])
    }

    fn u32(&mut self, field: &str) -> Result<u32, Error> {
        self.array(field).map(u32::from_le_bytes)
    }

    fn u64(&mut self, field: &str) -> Result<u64, Error> {
        self.array(field).map(u64::from_le_bytes)
    }

    fn f64(&mut self, field: &str) -> Result<f64, Error> {
        self.array(field).map(f64::from_le_bytes)
    }
}

/// Writes fields front to back into a buffer whose size the caller computed exactly.
pub(crate) struct Writer<'a> {
    rest: &'a mut [u8],
}

impl<'a> Writer<'a> {
    pub fn new(out: &'a mut [u8]) -> Self {
        Writer { rest: out }
    }

    /// Copies `bytes` and moves on. The encoders size buffers from the same structure they
    /// write, so running out here is an internal bug, not something bytes from outside reach.
    pub fn put(&mut self, bytes: &[u8]) {
        let rest = std::mem::take(&mut self.rest);
        let (head, tail) = rest.split_at_mut(bytes.len());
        head.copy_from_slice(bytes);
        self.rest = tail;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_round_trip() {
        let h = Header {
            version: FORMAT_VERSION,
            hash_algorithm: 1,
            representation: Representation::SplitBlock,
            flags: FLAG_SCALING,
            seed: 0x5EED_B100,
            layers: 3,
            capacity: 100_000,
            error_rate: 0.01,
            items: 12345,
        };
        let mut bytes = [0u8; HEADER_BYTES];
        h.write(&mut bytes);
        assert_eq!(&bytes[..8], b"SBLM\x02\x01\x02\x01");
        assert_eq!(Header::read(&bytes), Ok(h));
        for len in 0..HEADER_BYTES {
            assert!(matches!(
                Header::read(&bytes[..len]),
                Err(Error::Malformed(_))
            ));
        }
    }

    #[test]
    fn rejects_unknown_magic_and_representation() {
        let mut bytes = [0u8; HEADER_BYTES];
        bytes[..4].copy_from_slice(b"SBLX");
        assert!(Header::read(&bytes).is_err());
        bytes[..4].copy_from_slice(&MAGIC);
        bytes[6] = 3;
        assert!(Header::read(&bytes).is_err());
    }
}
