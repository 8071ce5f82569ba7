//! A client of the harness line protocol, version 1 (docs/protocol.md).
//!
//! One request line, one reply line, synchronously: `request` returns only after the
//! harness answered, so a phase starts and ends only after its boundary was measured.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::time::Duration;

use crate::Error;

/// How long a reply may take.  The harness answers a boundary after one counter read and
/// CodeCarbon's task start or stop; the reference client waits 10 s, this one longer,
/// because a loaded host can be slow and a late reply is not an error of the stack.
const REPLY_TIMEOUT: Duration = Duration::from_secs(60); // not-recipe: socket timeout

pub struct Client {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
}

impl Client {
    pub fn connect(port: u16) -> Result<Client, Error> {
        let stream = TcpStream::connect((Ipv4Addr::LOCALHOST, port))
            .map_err(|e| format!("cannot connect to the harness on port {port}: {e}"))?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT))?;
        let reader = BufReader::new(stream.try_clone()?);
        Ok(Client { writer: stream, reader })
    }

    /// Send one request; the reply after "OK ", or an error carrying the harness's reply.
    pub fn request(&mut self, line: &str) -> Result<String, Error> {
        self.writer
            .write_all(format!("{line}\n").as_bytes())
            .map_err(|e| format!("the harness went away: {e}"))?;
        let mut reply = String::new();
        let n = self
            .reader
            .read_line(&mut reply)
            .map_err(|e| format!("no reply from the harness: {e}"))?;
        if n == 0 || !reply.ends_with('\n') {
            return Err("the harness closed the connection".into());
        }
        let reply = reply.trim_end_matches(['\n', '\r']);
        match reply.strip_prefix("OK ") {
            Some(rest) => Ok(rest.to_string()),
            None => {
                let head: String = line.chars().take(80).collect();
                Err(format!("harness: {reply} (for: {head})").into())
            }
        }
    }

    /// HELLO: the job, as the reply's key=value tokens.
    pub fn hello(&mut self, stack: &str) -> Result<BTreeMap<String, String>, Error> {
        let reply = self.request(&format!("HELLO 1 {stack}"))?;
        let mut job = BTreeMap::new();
        for token in reply.split(' ').skip(2) {
            if let Some((key, value)) = token.split_once('=') {
                job.insert(key.to_string(), percent_decode(value)?);
            }
        }
        Ok(job)
    }
}

pub fn percent_decode(text: &str) -> Result<String, Error> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3])?;
            out.push(u8::from_str_radix(hex, 16).map_err(|_| format!("bad percent escape in {text:?}"))?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Ok(String::from_utf8(out)?)
}

pub fn percent_encode(text: &str) -> String {
    let mut out = String::new();
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Python's `repr()` of a float, the canonical number form of the package: the shortest
/// digits that round-trip (Rust's `{:e}` gives those), positional for decimal exponents
/// from -4 to 15, scientific with a signed two-digit exponent otherwise.
pub fn python_repr(value: f64) -> String {
    if !value.is_finite() {
        return if value.is_nan() { "nan".into() } else if value > 0.0 { "inf".into() } else { "-inf".into() };
    }
    let sci = format!("{value:e}");
    let (mantissa, exponent) = sci.split_once('e').expect("{:e} always writes an exponent");
    let exponent: i32 = exponent.parse().expect("{:e} writes an integer exponent");
    let negative = mantissa.starts_with('-');
    let digits: String = mantissa.chars().filter(|c| c.is_ascii_digit()).collect();
    let body = if (-4..16).contains(&exponent) {
        if exponent >= 0 {
            let int_len = exponent as usize + 1;
            if digits.len() <= int_len {
                format!("{}{}.0", digits, "0".repeat(int_len - digits.len()))
            } else {
                format!("{}.{}", &digits[..int_len], &digits[int_len..])
            }
        } else {
            format!("0.{}{}", "0".repeat((-exponent - 1) as usize), digits)
        }
    } else {
        let rest = if digits.len() > 1 { format!(".{}", &digits[1..]) } else { String::new() };
        format!("{}{}e{}{:02}", &digits[..1], rest, if exponent < 0 { '-' } else { '+' }, exponent.abs())
    };
    if negative { format!("-{body}") } else { body }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repr_matches_python() {
        for (value, text) in [
            (0.0002, "0.0002"), (1e-5, "1e-05"), (2.302585092994046, "2.302585092994046"),
            (3.0, "3.0"), (0.5, "0.5"), (1e16, "1e+16"), (123456789012345.6, "123456789012345.6"),
            (-0.25, "-0.25"), (0.0, "0.0"), (1.5e-7, "1.5e-07"), (0.1, "0.1"),
        ] {
            assert_eq!(python_repr(value), text);
        }
    }

    #[test]
    fn percent_round_trip() {
        let text = "/srv/deep green/data=1%";
        assert_eq!(percent_decode(&percent_encode(text)).unwrap(), text);
        assert_eq!(percent_decode("%2Fsrv").unwrap(), "/srv");
    }
}
