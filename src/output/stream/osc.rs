//! OSC 1.0 encoding: messages of int32, float32 and string arguments, and bundles of them
//! (big-endian, every item padded to four bytes).

/// One OSC argument.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg<'a> {
    Int(i32),
    Float(f32),
    Str(&'a str),
}

/// Appends `s` as an OSC string: its bytes, a NUL, then NULs up to a multiple of four.
fn put_string(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(s.as_bytes());
    let pad = 4 - s.len() % 4;
    out.extend(std::iter::repeat_n(0u8, pad));
}

/// Appends one OSC message.
pub fn put_message(out: &mut Vec<u8>, address: &str, args: &[Arg]) {
    put_string(out, address);
    // The type tag string: ',' then one letter per argument.
    let tags_len = 1 + args.len();
    out.push(b',');
    out.extend(args.iter().map(|a| match a {
        Arg::Int(_) => b'i',
        Arg::Float(_) => b'f',
        Arg::Str(_) => b's',
    }));
    out.extend(std::iter::repeat_n(0u8, 4 - tags_len % 4));
    for arg in args {
        match arg {
            Arg::Int(v) => out.extend_from_slice(&v.to_be_bytes()),
            Arg::Float(v) => out.extend_from_slice(&v.to_be_bytes()),
            Arg::Str(s) => put_string(out, s),
        }
    }
}

/// Builds one bundle in place: `#bundle`, the time tag "immediately", then each element
/// prefixed with its size.
pub struct Bundle {
    bytes: Vec<u8>,
}

impl Bundle {
    /// The header alone.
    pub const HEADER_LEN: usize = 16;

    pub fn new(mut bytes: Vec<u8>) -> Self {
        bytes.clear();
        put_string(&mut bytes, "#bundle");
        // OSC time tag 1: "immediately".
        bytes.extend_from_slice(&1u64.to_be_bytes());
        Self { bytes }
    }

    /// Appends one message as an element.
    pub fn message(&mut self, address: &str, args: &[Arg]) {
        let at = self.bytes.len();
        self.bytes.extend_from_slice(&[0; 4]);
        put_message(&mut self.bytes, address, args);
        let size = (self.bytes.len() - at - 4) as i32;
        self.bytes[at..at + 4].copy_from_slice(&size.to_be_bytes());
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.len() <= Self::HEADER_LEN
    }

    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The buffer back, to build the next bundle in.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// The encoded size of a message, without building it.
pub fn message_len(address: &str, args: &[Arg]) -> usize {
    let string = |s: &str| (s.len() / 4 + 1) * 4;
    string(address)
        + ((1 + args.len()) / 4 + 1) * 4
        + args
            .iter()
            .map(|a| match a {
                Arg::Int(_) | Arg::Float(_) => 4,
                Arg::Str(s) => string(s),
            })
            .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_is_padded_to_four_bytes_as_in_the_spec() {
        // The OSC 1.0 specification's example: "/oscillator/4/frequency" ,f 440.0.
        let mut out = Vec::new();
        put_message(&mut out, "/oscillator/4/frequency", &[Arg::Float(440.0)]);
        let mut expected = b"/oscillator/4/frequency\0,f\0\0".to_vec();
        expected.extend_from_slice(&[0x43, 0xdc, 0x00, 0x00]);
        assert_eq!(out, expected);
        assert_eq!(
            message_len("/oscillator/4/frequency", &[Arg::Float(440.0)]),
            out.len()
        );
        let args = [Arg::Str("set"), Arg::Int(3), Arg::Str("abcd")];
        let mut out = Vec::new();
        put_message(&mut out, "/a", &args);
        assert_eq!(out.len() % 4, 0);
        assert_eq!(message_len("/a", &args), out.len());
    }
}
