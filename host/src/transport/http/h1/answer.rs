//! Reading a receiver's answer: its head (interim 1xx answers skipped), its framing
//! (`Content-Length`, chunked, or to the connection's close) and its body, each bounded, and
//! whether the connection may carry another request after it.

use hyper::header::{HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use hyper::{StatusCode, Version};
use tokio::io::{AsyncRead, AsyncReadExt};

use super::{Answer, Conn, WireError, MAX_HEADERS, MAX_HEAD_BYTES, READ_CHUNK};

/// Whether a comma-separated header value lists `token` (case-insensitive).
pub(super) fn has_token(value: &HeaderValue, token: &str) -> bool {
    value.as_bytes().split(|b| *b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token.as_bytes()))
}

/// An answer's status line and header fields.
struct Head {
    status: StatusCode,
    version: Version,
    headers: HeaderMap,
}

impl Head {
    /// HTTP/1.1 keeps a connection unless told otherwise; HTTP/1.0's are not reused.
    fn keep_alive(&self) -> bool {
        self.version == Version::HTTP_11 && !self.headers.get_all(CONNECTION).iter().any(|v| has_token(v, "close"))
    }
}

/// The answer whose first bytes are `first`, and the connection when it may carry another
/// request (the body was read to its end, nothing came after it, and the answer did not close it).
pub(super) async fn read_answer(
    mut conn: Conn,
    first: Vec<u8>,
    head_only: bool,
    limit: usize,
) -> Result<(Answer, Option<Conn>), WireError> {
    let (answer, reusable) = read_answer_from(&mut conn, first, head_only, limit).await?;
    Ok((answer, reusable.then_some(conn)))
}

/// [`read_answer`] on any byte stream (a connection, or bytes in memory for the fuzz target):
/// the answer, and whether the stream may carry another.
async fn read_answer_from(
    conn: &mut (impl AsyncRead + Unpin),
    first: Vec<u8>,
    head_only: bool,
    limit: usize,
) -> Result<(Answer, bool), WireError> {
    let mut buffered = Buffered { bytes: first, start: 0 };
    let head = read_head(conn, &mut buffered).await?;
    let framing = framing(&head, head_only)?;
    let body = read_body(conn, &mut buffered, framing, limit).await?;
    // An answer framed two ways (`Transfer-Encoding` and `Content-Length`) was read by the
    // first, but whoever sent it may have meant the second: what follows on the connection
    // cannot be trusted to start where this answer ended (RFC 9112 §6.3).
    let framed_twice = head.headers.contains_key(TRANSFER_ENCODING) && head.headers.contains_key(CONTENT_LENGTH);
    let reusable = body.complete && head.keep_alive() && !framed_twice && buffered.unread().is_empty();
    let mut response = hyper::Response::new(()).into_parts().0;
    response.status = head.status;
    response.version = head.version;
    response.headers = head.headers;
    Ok((Answer { response, body: body.bytes, truncated: body.truncated }, reusable))
}

/// What the client makes of `bytes` as a receiver's whole answer (the connection closing after
/// them), for the fuzz target (`fuzz/`) and the property test: the answer, whether the
/// connection could be reused, or the error's message. Reads from memory; nothing is sent.
#[doc(hidden)]
pub fn read_answer_bytes(bytes: &[u8], head_only: bool, limit: usize) -> Result<(Answer, bool), String> {
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("a runtime without drivers");
    let mut stream = bytes;
    runtime.block_on(read_answer_from(&mut stream, Vec::new(), head_only, limit)).map_err(|e| e.to_string())
}

/// The final answer's head (interim 1xx answers are skipped), consumed from `buffered`.
async fn read_head(conn: &mut (impl AsyncRead + Unpin), buffered: &mut Buffered) -> Result<Head, WireError> {
    loop {
        // Not a `match` with the read in an arm: the parsed head would be kept across it.
        if let Some((head, len)) = parse_head(buffered.unread())? {
            if len > MAX_HEAD_BYTES {
                return Err(WireError::HeadTooLarge);
            }
            buffered.consume(len);
            if head.status == StatusCode::SWITCHING_PROTOCOLS {
                return Err(WireError::SwitchedProtocols);
            }
            if !head.status.is_informational() {
                return Ok(head);
            }
            continue;
        }
        if buffered.unread().len() > MAX_HEAD_BYTES {
            return Err(WireError::HeadTooLarge);
        }
        if buffered.fill(conn).await? == 0 {
            return Err(WireError::Incomplete);
        }
    }
}

/// The head at the start of `bytes` and its length, or `None` when it is not all there yet.
/// A plain function: httparse's field array (3 KiB) is not part of any future.
fn parse_head(bytes: &[u8]) -> Result<Option<(Head, usize)>, WireError> {
    let mut fields = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut response = httparse::Response::new(&mut fields);
    let len = match response.parse(bytes) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(httparse::Error::TooManyHeaders) => return Err(WireError::TooManyHeaders),
        Err(e) => return Err(WireError::Malformed(e)),
    };
    let code = response.code.expect("a complete response has a status");
    let status = StatusCode::from_u16(code).map_err(|_| WireError::Malformed(httparse::Error::Status))?;
    let version = if response.version == Some(0) { Version::HTTP_10 } else { Version::HTTP_11 };
    let mut headers = HeaderMap::with_capacity(response.headers.len());
    for field in response.headers.iter() {
        let name = HeaderName::from_bytes(field.name.as_bytes())
            .map_err(|_| WireError::Malformed(httparse::Error::HeaderName))?;
        let value =
            HeaderValue::from_bytes(field.value).map_err(|_| WireError::Malformed(httparse::Error::HeaderValue))?;
        headers.append(name, value);
    }
    Ok(Some((Head { status, version, headers }, len)))
}

/// How the answer's body ends (RFC 9112 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Empty,
    Length(u64),
    Chunked,
    UntilClose,
}

fn framing(head: &Head, head_only: bool) -> Result<Framing, WireError> {
    if head_only || head.status == StatusCode::NO_CONTENT || head.status == StatusCode::NOT_MODIFIED {
        return Ok(Framing::Empty);
    }
    if let Some(last) = head.headers.get_all(TRANSFER_ENCODING).iter().next_back() {
        // RFC 9112 §6.1: an HTTP/1.0 message with Transfer-Encoding is to be treated as faulty
        // framing (it was likely forwarded by something that did not decode it). hyper refuses
        // it too (found by the differential test against hyper, h1/differential.rs).
        if head.version == Version::HTTP_10 {
            return Err(WireError::Framing("Transfer-Encoding in an HTTP/1.0 answer"));
        }
        let chunked = last
            .as_bytes()
            .rsplit(|b| *b == b',')
            .next()
            .is_some_and(|t| t.trim_ascii().eq_ignore_ascii_case(b"chunked"));
        return Ok(if chunked { Framing::Chunked } else { Framing::UntilClose });
    }
    let mut length = None;
    for value in head.headers.get_all(CONTENT_LENGTH) {
        for item in value.as_bytes().split(|b| *b == b',') {
            let item = std::str::from_utf8(item.trim_ascii()).ok();
            let parsed = item.filter(|t| t.bytes().all(|b| b.is_ascii_digit())).and_then(|t| t.parse::<u64>().ok());
            match (parsed, length) {
                (None, _) => return Err(WireError::Framing("Content-Length is not a number")),
                (Some(n), Some(seen)) if n != seen => {
                    return Err(WireError::Framing("Content-Length is given twice, differently"))
                }
                (Some(n), _) => length = Some(n),
            }
        }
    }
    Ok(length.map_or(Framing::UntilClose, Framing::Length))
}

/// At most the limit of an answer's body.
struct Body {
    bytes: Vec<u8>,
    /// More came than the limit; the rest is left unread.
    truncated: bool,
    /// Read to its end: the connection may carry another request.
    complete: bool,
}

impl Body {
    /// Keep `data`, up to `limit` in all; false once the limit cut it.
    fn keep(&mut self, data: &[u8], limit: usize) -> bool {
        let room = limit - self.bytes.len();
        if data.len() > room {
            self.bytes.extend_from_slice(&data[..room]);
            self.truncated = true;
            return false;
        }
        self.bytes.extend_from_slice(data);
        true
    }
}

async fn read_body(
    conn: &mut (impl AsyncRead + Unpin),
    buffered: &mut Buffered,
    framing: Framing,
    limit: usize,
) -> Result<Body, WireError> {
    let mut body = Body { bytes: Vec::new(), truncated: false, complete: false };
    match framing {
        Framing::Empty => body.complete = true,
        Framing::Length(length) => body.complete = read_exactly(conn, buffered, length, &mut body, limit).await?,
        Framing::UntilClose => loop {
            let take = buffered.unread().len();
            if !body.keep(buffered.unread(), limit) {
                return Ok(body);
            }
            buffered.consume(take);
            if buffered.fill(conn).await? == 0 {
                // The close ends the body; the connection is done.
                return Ok(body);
            }
        },
        Framing::Chunked => loop {
            let line = read_line(conn, buffered).await?;
            let size = chunk_size(&line)?;
            if size == 0 {
                // Trailer fields, up to the empty line; not kept.
                let mut trailers = 0;
                loop {
                    let line = read_line(conn, buffered).await?;
                    if line.is_empty() {
                        body.complete = true;
                        return Ok(body);
                    }
                    trailers += line.len();
                    if trailers > MAX_HEAD_BYTES {
                        return Err(WireError::HeadTooLarge);
                    }
                }
            }
            if !read_exactly(conn, buffered, size, &mut body, limit).await? {
                return Ok(body);
            }
            if !read_line(conn, buffered).await?.is_empty() {
                return Err(WireError::Framing("a chunk's data runs past its size"));
            }
        },
    }
    Ok(body)
}

/// The next `length` bytes into `body` (up to its limit); false when the limit cut them (the
/// rest is left unread).
async fn read_exactly(
    conn: &mut (impl AsyncRead + Unpin),
    buffered: &mut Buffered,
    length: u64,
    body: &mut Body,
    limit: usize,
) -> Result<bool, WireError> {
    let mut left = length;
    while left > 0 {
        if buffered.unread().is_empty() && buffered.fill(conn).await? == 0 {
            return Err(WireError::Incomplete);
        }
        let unread = buffered.unread();
        let take = unread.len().min(usize::try_from(left).unwrap_or(usize::MAX));
        if !body.keep(&unread[..take], limit) {
            return Ok(false);
        }
        buffered.consume(take);
        left -= take as u64;
    }
    Ok(true)
}

/// A chunk-size line's size (extensions after `;` ignored).
fn chunk_size(line: &[u8]) -> Result<u64, WireError> {
    let digits = line.split(|b| *b == b';').next().unwrap_or_default().trim_ascii();
    let bad = WireError::Framing("a chunk size is not a hexadecimal number");
    if digits.is_empty() || digits.len() > 15 {
        return Err(bad);
    }
    let text = std::str::from_utf8(digits).map_err(|_| WireError::Framing("a chunk size is not text"))?;
    u64::from_str_radix(text, 16).map_err(|_| bad)
}

/// The next line (without its CRLF), consumed.
async fn read_line(conn: &mut (impl AsyncRead + Unpin), buffered: &mut Buffered) -> Result<Vec<u8>, WireError> {
    loop {
        let unread = buffered.unread();
        if let Some(end) = unread.windows(2).position(|w| w == b"\r\n") {
            let line = unread[..end].to_vec();
            buffered.consume(end + 2);
            return Ok(line);
        }
        if unread.len() > MAX_HEAD_BYTES {
            return Err(WireError::HeadTooLarge);
        }
        if buffered.fill(conn).await? == 0 {
            return Err(WireError::Incomplete);
        }
    }
}

/// Bytes read from a connection and not yet used.
struct Buffered {
    bytes: Vec<u8>,
    start: usize,
}

impl Buffered {
    fn unread(&self) -> &[u8] {
        &self.bytes[self.start..]
    }

    fn consume(&mut self, n: usize) {
        self.start += n;
        if self.start == self.bytes.len() {
            self.bytes.clear();
            self.start = 0;
        }
    }

    /// Read more; 0 at the end of the stream.
    async fn fill(&mut self, conn: &mut (impl AsyncRead + Unpin)) -> Result<usize, WireError> {
        if self.start > 0 {
            self.bytes.drain(..self.start);
            self.start = 0;
        }
        if self.bytes.capacity() - self.bytes.len() < READ_CHUNK / 2 {
            self.bytes.reserve(READ_CHUNK);
        }
        conn.read_buf(&mut self.bytes).await.map_err(WireError::Read)
    }
}
