//! RESP, the Redis serialization protocol: requests in, replies out.
//!
//! Requests are arrays of bulk strings (`*2\r\n$3\r\nGET\r\n$1\r\nk\r\n`)
//! or inline lines (`GET k\r\n`, what a person types into telnet). The
//! parser is incremental: fed whatever bytes have arrived, it copies each
//! complete argument into the request and keeps its place in a partly
//! received array, so an argument is never scanned twice however the bytes
//! are split. It is bounded: the argument count, each bulk length and an
//! inline line have limits, checked before anything is allocated for them.
//!
//! Replies are written straight into the connection's output buffer. RESP3
//! (after `HELLO 3`) differs only in nulls, maps, doubles and sets.

/// Longest inline request or `*`/`$` header line (Redis: 64 KiB).
pub const MAX_INLINE: usize = 64 * 1024;

/// Argument bytes a connection keeps room for between requests.
const KEEP_ARGS: usize = 16 << 20;

/// Frees a buffer, first handing its whole pages back to the kernel when
/// it is large (a value of megabytes, or one a client never finished
/// sending): an allocator may keep freed memory for reuse (mimalloc
/// purges it only at a later allocation by the same thread, which an idle
/// event loop never makes), and the server's resident size must fall when
/// the client that made it grow is gone.
pub fn free_buffer(buf: Vec<u8>) {
    const PAGE: usize = 4096;
    if buf.capacity() < RELEASE_ABOVE {
        return;
    }
    let start = buf.as_ptr() as usize;
    let (first, end) = (start.next_multiple_of(PAGE), (start + buf.capacity()) / PAGE * PAGE);
    if first < end {
        // SAFETY: [first, end) lies inside `buf`'s allocation, which this
        // function owns and frees right after; MADV_DONTNEED only drops
        // the pages' contents (they read as zeros if touched again), which
        // nothing reads before the allocator reuses them.
        unsafe { libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_DONTNEED) };
    }
}

/// Buffers from this size up are handed back by [`free_buffer`].
const RELEASE_ABOVE: usize = 1 << 20;

/// Bounds on one request.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Longest bulk string (Redis `proto-max-bulk-len`, 512 MiB).
    pub max_bulk: usize,
    /// Most arguments in one request (Redis: 1024 * 1024).
    pub max_args: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits { max_bulk: 512 << 20, max_args: 1 << 20 }
    }
}

/// A request's arguments, stored one after another in one buffer that is
/// reused from request to request.
#[derive(Debug, Default, Clone)]
pub struct Args {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Args {
    /// Number of arguments (the command name included).
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are none (an empty inline line).
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Argument `i`.
    pub fn get(&self, i: usize) -> &[u8] {
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        &self.data[start..self.ends[i]]
    }

    /// Arguments `from..` in order.
    pub fn iter_from(&self, from: usize) -> impl Iterator<Item = &[u8]> + '_ {
        (from..self.len()).map(move |i| self.get(i))
    }

    /// Appends an argument (for tests and for queued transactions).
    pub fn push(&mut self, arg: &[u8]) {
        self.data.extend_from_slice(arg);
        self.ends.push(self.data.len());
    }

    /// Empties it, keeping the buffers unless a big request left them
    /// large: a connection does not go on holding its largest value.
    pub fn clear(&mut self) {
        self.data.clear();
        self.ends.clear();
        if self.data.capacity() > KEEP_ARGS {
            free_buffer(std::mem::take(&mut self.data));
        }
    }

    /// A copy that owns exactly what it needs (a command queued by MULTI).
    pub fn to_owned_args(&self) -> Args {
        Args { data: self.data.clone(), ends: self.ends.clone() }
    }
}

impl Drop for Args {
    fn drop(&mut self) {
        free_buffer(std::mem::take(&mut self.data));
    }
}

/// Why a request could not be parsed. The connection is answered with
/// `-ERR Protocol error: ...` and closed, as Redis does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProtocolError {
    Invalid(&'static str),
    /// A byte other than `$` where an argument should begin.
    Unexpected(u8),
}

impl std::fmt::Display for ProtocolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProtocolError::Invalid(what) => write!(f, "Protocol error: {what}"),
            ProtocolError::Unexpected(b) => write!(f, "Protocol error: expected '$', got '{}'", *b as char),
        }
    }
}

/// Where the parser is inside a partly received array.
#[derive(Debug, Default)]
pub struct Parser {
    /// Arguments still expected in the current array (0: between requests).
    pending: usize,
}

impl Parser {
    /// Parses from `buf`, adding arguments to `args` (which holds those
    /// of a partly received array from the last call). Returns the bytes
    /// consumed and whether `args` now holds a whole request. Consumed
    /// bytes must be dropped from the front of `buf` before the next call.
    pub fn parse(&mut self, buf: &[u8], args: &mut Args, limits: &Limits) -> Result<(usize, bool), ProtocolError> {
        let mut pos = 0;
        if self.pending == 0 {
            args.clear();
            match buf.first() {
                None => return Ok((0, false)),
                Some(b'*') => {
                    let Some((n, next)) = header(buf, 1, "too big mbulk count string")? else {
                        return Ok((0, false));
                    };
                    if n > limits.max_args as i64 {
                        return Err(ProtocolError::Invalid("invalid multibulk length"));
                    }
                    pos = next;
                    if n <= 0 {
                        // `*0` and `*-1` are skipped, as Redis does.
                        return Ok((pos, false));
                    }
                    self.pending = n as usize;
                }
                Some(_) => return inline(buf, args),
            }
        }
        while self.pending > 0 {
            let Some(&first) = buf.get(pos) else { break };
            if first != b'$' {
                return Err(ProtocolError::Unexpected(first));
            }
            let Some((len, body)) = header(&buf[pos..], 1, "too big bulk count string")? else { break };
            if len < 0 || len as u64 > limits.max_bulk as u64 {
                return Err(ProtocolError::Invalid("invalid bulk length"));
            }
            let (len, body) = (len as usize, pos + body);
            if buf.len() < body + len + 2 {
                break;
            }
            if &buf[body + len..body + len + 2] != b"\r\n" {
                return Err(ProtocolError::Invalid("bulk string not terminated by CRLF"));
            }
            args.push(&buf[body..body + len]);
            pos = body + len + 2;
            self.pending -= 1;
        }
        Ok((pos, self.pending == 0))
    }

    /// Whether the next byte starts a new request (no array is partly
    /// parsed).
    pub fn between_requests(&self) -> bool {
        self.pending == 0
    }

    /// Bytes still needed before the argument at the front of `buf` is
    /// complete, if its header has arrived (so the reader can reserve room
    /// for a large bulk string at once).
    pub fn wants(&self, buf: &[u8]) -> Option<usize> {
        if self.pending == 0 || buf.first() != Some(&b'$') {
            return None;
        }
        let (len, body) = header(buf, 1, "").ok()??;
        Some((body + len.max(0) as usize + 2).saturating_sub(buf.len()))
    }
}

/// Reads the integer line after a `*` or `$`: `Some((value, next))`, or
/// `None` if the line has not fully arrived.
fn header(buf: &[u8], from: usize, too_long: &'static str) -> Result<Option<(i64, usize)>, ProtocolError> {
    let Some(cr) = buf[from..].iter().position(|&b| b == b'\r') else {
        if buf.len() > MAX_INLINE {
            return Err(ProtocolError::Invalid(too_long));
        }
        return Ok(None);
    };
    let end = from + cr;
    if buf.len() < end + 2 {
        return Ok(None);
    }
    if buf[end + 1] != b'\n' {
        return Err(ProtocolError::Invalid(if buf[0] == b'*' {
            "invalid multibulk length"
        } else {
            "invalid bulk length"
        }));
    }
    match parse_i64(&buf[from..end]) {
        Some(n) => Ok(Some((n, end + 2))),
        None => {
            Err(ProtocolError::Invalid(if buf[0] == b'*' { "invalid multibulk length" } else { "invalid bulk length" }))
        }
    }
}

/// An inline request: one line, split on blanks, with Redis's quoting.
fn inline(buf: &[u8], args: &mut Args) -> Result<(usize, bool), ProtocolError> {
    let Some(nl) = buf.iter().position(|&b| b == b'\n') else {
        if buf.len() > MAX_INLINE {
            return Err(ProtocolError::Invalid("too big inline request"));
        }
        return Ok((0, false));
    };
    if nl > MAX_INLINE {
        return Err(ProtocolError::Invalid("too big inline request"));
    }
    let line = buf[..nl].strip_suffix(b"\r").unwrap_or(&buf[..nl]);
    split_args(line, args).map_err(|_| ProtocolError::Invalid("unbalanced quotes in request"))?;
    Ok((nl + 1, !args.is_empty()))
}

/// A quote without its closing mate (or a closing quote followed by more).
#[derive(Debug)]
pub struct UnbalancedQuotes;

/// Splits a line as `redis-cli` and inline requests do: blanks separate
/// arguments; "double quotes" take `\n \r \t \b \a \\ \" \xHH`; 'single
/// quotes' take only `\'`. A closing quote must be followed by a blank.
pub fn split_args(line: &[u8], args: &mut Args) -> Result<(), UnbalancedQuotes> {
    let mut i = 0;
    let mut cur = Vec::new();
    loop {
        while i < line.len() && line[i].is_ascii_whitespace() {
            i += 1;
        }
        if i == line.len() {
            return Ok(());
        }
        cur.clear();
        match line[i] {
            b'"' => {
                i += 1;
                loop {
                    match line.get(i) {
                        None => return Err(UnbalancedQuotes),
                        Some(b'"') => break,
                        Some(b'\\') if i + 3 < line.len() && line[i + 1] == b'x' => {
                            match (hex(line[i + 2]), hex(line[i + 3])) {
                                (Some(h), Some(l)) => {
                                    cur.push(h << 4 | l);
                                    i += 4;
                                }
                                _ => {
                                    cur.push(b'\\');
                                    i += 1;
                                }
                            }
                        }
                        Some(b'\\') if i + 1 < line.len() => {
                            cur.push(match line[i + 1] {
                                b'n' => b'\n',
                                b'r' => b'\r',
                                b't' => b'\t',
                                b'b' => 8,
                                b'a' => 7,
                                c => c,
                            });
                            i += 2;
                        }
                        Some(&c) => {
                            cur.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                if i < line.len() && !line[i].is_ascii_whitespace() {
                    return Err(UnbalancedQuotes);
                }
            }
            b'\'' => {
                i += 1;
                loop {
                    match line.get(i) {
                        None => return Err(UnbalancedQuotes),
                        Some(b'\'') => break,
                        Some(b'\\') if line.get(i + 1) == Some(&b'\'') => {
                            cur.push(b'\'');
                            i += 2;
                        }
                        Some(&c) => {
                            cur.push(c);
                            i += 1;
                        }
                    }
                }
                i += 1;
                if i < line.len() && !line[i].is_ascii_whitespace() {
                    return Err(UnbalancedQuotes);
                }
            }
            _ => {
                while i < line.len() && !line[i].is_ascii_whitespace() {
                    cur.push(line[i]);
                    i += 1;
                }
            }
        }
        args.push(&cur);
    }
}

fn hex(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// Parses a decimal integer as Redis's `string2ll` does: optional `-`, no
/// `+`, no leading zeros, no blanks, within i64.
pub fn parse_i64(s: &[u8]) -> Option<i64> {
    let (neg, digits) = match s {
        [b'-', rest @ ..] => (true, rest),
        _ => (false, s),
    };
    if digits.is_empty() || digits.len() > 19 || (digits[0] == b'0' && (digits.len() > 1 || neg)) {
        return None;
    }
    let mut v: i128 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (d - b'0') as i128;
    }
    let v = if neg { -v } else { v };
    i64::try_from(v).ok()
}

/// Parses a float as Redis does for INCRBYFLOAT: no blanks, not NaN.
pub fn parse_f64(s: &[u8]) -> Option<f64> {
    let t = std::str::from_utf8(s).ok()?;
    if t.is_empty() || t.starts_with(|c: char| c.is_whitespace()) || t.ends_with(|c: char| c.is_whitespace()) {
        return None;
    }
    let v: f64 = t.parse().ok()?;
    (!v.is_nan()).then_some(v)
}

/// Formats a float as Redis replies it (`%.17Lg`, trailing zeros cut).
pub fn format_f64(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == v.trunc() && v.abs() < 1e17 {
        return format!("{}", v as i64);
    }
    let mut s = format!("{v}");
    if s.contains('e') {
        s = format!("{v:e}");
    }
    s
}

/// Formats a double as Redis replies one (a sorted set's score): an
/// integral value as an integer, others as C's `%.17g`.
pub fn format_double(v: f64) -> String {
    if v.is_infinite() {
        return if v > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if v == v.trunc() && v.abs() < (1u64 << 52) as f64 {
        return format!("{}", v as i64);
    }
    // %.17g: 17 significant digits, fixed notation for exponents -4..17,
    // trailing zeros cut.
    let sci = format!("{v:.16e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if (-4..17).contains(&exp) {
        trim(format!("{v:.*}", (16 - exp).max(0) as usize))
    } else {
        let m = trim(mantissa.to_string());
        format!("{m}e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs())
    }
}

/// A reply writer over a connection's output buffer, in RESP2 or RESP3.
#[derive(Debug)]
pub struct Out<'a> {
    pub buf: &'a mut Vec<u8>,
    pub resp3: bool,
}

impl Out<'_> {
    pub fn simple(&mut self, s: &str) {
        self.buf.push(b'+');
        self.buf.extend_from_slice(s.as_bytes());
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn ok(&mut self) {
        self.buf.extend_from_slice(b"+OK\r\n");
    }

    /// An error line; `msg` starts with its code (`ERR ...`, `WRONGTYPE ...`).
    pub fn error(&mut self, msg: &str) {
        self.buf.push(b'-');
        // A newline would end the error early and desynchronize the client.
        self.buf.extend(msg.bytes().map(|b| if b == b'\r' || b == b'\n' { b' ' } else { b }));
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn int(&mut self, n: i64) {
        self.line(b':', n);
    }

    pub fn bulk(&mut self, b: &[u8]) {
        self.line(b'$', b.len() as i64);
        self.buf.extend_from_slice(b);
        self.buf.extend_from_slice(b"\r\n");
    }

    pub fn bulk_str(&mut self, s: &str) {
        self.bulk(s.as_bytes());
    }

    pub fn opt_bulk(&mut self, b: Option<&[u8]>) {
        match b {
            Some(b) => self.bulk(b),
            None => self.null(),
        }
    }

    /// The null bulk string (`$-1`), or RESP3's `_`.
    pub fn null(&mut self) {
        self.buf.extend_from_slice(if self.resp3 { b"_\r\n" } else { b"$-1\r\n" });
    }

    /// The null array (`*-1`, EXEC after a failed WATCH), or RESP3's `_`.
    pub fn null_array(&mut self) {
        self.buf.extend_from_slice(if self.resp3 { b"_\r\n" } else { b"*-1\r\n" });
    }

    pub fn array(&mut self, n: usize) {
        self.line(b'*', n as i64);
    }

    /// Out-of-band data (pub/sub messages): RESP3 `>`, RESP2 an array.
    pub fn push(&mut self, n: usize) {
        self.line(if self.resp3 { b'>' } else { b'*' }, n as i64);
    }

    /// A map of `n` pairs: RESP3 `%`, RESP2 a flat array of `2n`.
    pub fn map(&mut self, n: usize) {
        if self.resp3 {
            self.line(b'%', n as i64);
        } else {
            self.line(b'*', 2 * n as i64);
        }
    }

    /// A set: RESP3 `~`, RESP2 an array.
    pub fn set(&mut self, n: usize) {
        self.line(if self.resp3 { b'~' } else { b'*' }, n as i64);
    }

    /// A double: RESP3 `,`, RESP2 a bulk string ([`format_double`]).
    pub fn double(&mut self, v: f64) {
        let s = format_double(v);
        if self.resp3 {
            self.buf.push(b',');
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    /// Verbatim text (INFO): RESP3 `=` with the `txt:` type, RESP2 bulk.
    pub fn verbatim(&mut self, s: &str) {
        if self.resp3 {
            self.line(b'=', s.len() as i64 + 4);
            self.buf.extend_from_slice(b"txt:");
            self.buf.extend_from_slice(s.as_bytes());
            self.buf.extend_from_slice(b"\r\n");
        } else {
            self.bulk(s.as_bytes());
        }
    }

    fn line(&mut self, kind: u8, n: i64) {
        self.buf.push(kind);
        push_decimal(self.buf, n);
        self.buf.extend_from_slice(b"\r\n");
    }
}

/// Appends `n` in decimal: every reply has a length or count line, and
/// `write!` through a `String` cost an allocation and the formatter each.
pub fn push_decimal(buf: &mut Vec<u8>, n: i64) {
    let mut digits = [0u8; 20];
    let mut at = digits.len();
    let mut m = n.unsigned_abs();
    loop {
        at -= 1;
        digits[at] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        buf.push(b'-');
    }
    buf.extend_from_slice(&digits[at..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_format_as_redis_percent_17g() {
        // What redis-server 7.0 replies for these scores.
        for (v, want) in [
            (0.1, "0.10000000000000001"),
            (1.5, "1.5"),
            (3.0, "3"),
            (0.30000000000000004, "0.30000000000000004"),
            (1e300, "1.0000000000000001e+300"),
            (f64::NEG_INFINITY, "-inf"),
            (1.3, "1.3"),
            (-2.5e-7, "-2.4999999999999999e-07"),
            (123456.789, "123456.789"),
            (1e17, "1e+17"),
            (12345678901234567.0, "12345678901234568"),
        ] {
            assert_eq!(format_double(v), want, "{v}");
        }
    }

    fn parse_all(input: &[u8], chunk: usize) -> Result<Vec<Vec<Vec<u8>>>, ProtocolError> {
        let (mut p, mut args, limits) = (Parser::default(), Args::default(), Limits::default());
        let (mut buf, mut got) = (Vec::new(), Vec::new());
        for piece in input.chunks(chunk.max(1)) {
            buf.extend_from_slice(piece);
            loop {
                let (used, done) = p.parse(&buf, &mut args, &limits)?;
                buf.drain(..used);
                if done {
                    got.push(args.iter_from(0).map(<[u8]>::to_vec).collect());
                } else if used == 0 {
                    break;
                }
            }
        }
        Ok(got)
    }

    #[test]
    fn arrays_and_inline_parse_the_same_however_split() {
        let input = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\nSET \"a b\" 'c\\'d' \"\\x41\\n\"\r\n*1\r\n$0\r\n\r\n";
        let want: Vec<Vec<Vec<u8>>> = vec![
            vec![b"GET".to_vec(), b"k".to_vec()],
            vec![b"SET".to_vec(), b"a b".to_vec(), b"c'd".to_vec(), b"A\n".to_vec()],
            vec![b"".to_vec()],
        ];
        for chunk in 1..input.len() {
            assert_eq!(parse_all(input, chunk).unwrap(), want, "chunk {chunk}");
        }
    }

    #[test]
    fn protocol_errors_are_redis_messages() {
        let e = |b: &[u8]| parse_all(b, 1024).unwrap_err().to_string();
        assert_eq!(e(b"*x\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(e(b"*2000000\r\n"), "Protocol error: invalid multibulk length");
        assert_eq!(e(b"*1\r\n$-5\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(e(b"*1\r\n$600000000\r\n"), "Protocol error: invalid bulk length");
        assert_eq!(e(b"*1\r\n:1\r\n"), "Protocol error: expected '$', got ':'");
        assert_eq!(e(b"SET \"a\r\n"), "Protocol error: unbalanced quotes in request");
        assert_eq!(
            parse_all(&vec![b'a'; MAX_INLINE + 1], MAX_INLINE + 1).unwrap_err(),
            ProtocolError::Invalid("too big inline request")
        );
        // Empty arrays and blank lines are skipped, not errors.
        assert_eq!(parse_all(b"*0\r\n\r\n*-1\r\nPING\r\n", 3).unwrap(), vec![vec![b"PING".to_vec()]]);
    }

    #[test]
    fn decimals_are_written_as_rust_formats_them() {
        for n in [0, 1, -1, 9, 10, 99, 100, 12345, -98765, i64::MAX, i64::MIN, i64::MIN + 1] {
            let mut buf = b"x".to_vec();
            push_decimal(&mut buf, n);
            assert_eq!(buf, format!("x{n}").into_bytes());
        }
    }

    #[test]
    fn integers_are_strict() {
        assert_eq!(parse_i64(b"-42"), Some(-42));
        assert_eq!(parse_i64(b"9223372036854775807"), Some(i64::MAX));
        for bad in [&b""[..], b"+1", b"01", b"-0", b" 1", b"1 ", b"9223372036854775808", b"1.0"] {
            assert_eq!(parse_i64(bad), None, "{:?}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn floats_format_like_redis() {
        assert_eq!(format_f64(10.5), "10.5");
        assert_eq!(format_f64(3.0), "3");
        assert_eq!(format_f64(5.0e3), "5000");
        assert_eq!(format_f64(f64::INFINITY), "inf");
    }
}
