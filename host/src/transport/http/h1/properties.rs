//! Properties of reading an answer, on generated and mutated bytes (seeded, so a failure
//! repeats; `TE_H1_PROP_CASES` for a longer run): whatever the bytes, the reading ends, keeps
//! within its limits and says what it made of them; and a body framed by length or by chunks
//! of any sizes reads back as it was sent. The coverage-guided fuzz target (`fuzz/`) runs the
//! same function, `read_answer_bytes`, for as long as one likes.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::*;

const LIMIT: usize = 4096;

fn cases() -> usize {
    std::env::var("TE_H1_PROP_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(3000)
}

/// A body as chunks of random sizes, with extensions and trailers now and then.
fn chunked(rng: &mut StdRng, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        let n = rng.gen_range(1..=rest.len());
        out.extend_from_slice(format!("{n:x}").as_bytes());
        if rng.gen_bool(0.2) {
            out.extend_from_slice(b";ext=1");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&rest[..n]);
        out.extend_from_slice(b"\r\n");
        rest = &rest[n..];
    }
    out.extend_from_slice(b"0\r\n");
    if rng.gen_bool(0.2) {
        out.extend_from_slice(b"Trailer-Field: x\r\n");
    }
    out.extend_from_slice(b"\r\n");
    out
}

fn body(rng: &mut StdRng, max: usize) -> Vec<u8> {
    let len = rng.gen_range(0..max);
    (0..len).map(|_| rng.gen()).collect()
}

/// A well-formed answer and its body.
fn answer(rng: &mut StdRng) -> (Vec<u8>, Vec<u8>) {
    let content = body(rng, 600);
    let mut out = Vec::new();
    if rng.gen_bool(0.2) {
        out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
    }
    out.extend_from_slice(b"HTTP/1.1 200 OK\r\nServer: p\r\n");
    if rng.gen_bool(0.5) {
        out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", content.len()).as_bytes());
        out.extend_from_slice(&content);
    } else {
        out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
        out.extend(chunked(rng, &content));
    }
    (out, content)
}

/// `bytes` damaged in one of the ways a broken or hostile receiver damages an answer.
fn mutate(rng: &mut StdRng, mut bytes: Vec<u8>) -> Vec<u8> {
    for _ in 0..rng.gen_range(1..4) {
        let at = rng.gen_range(0..=bytes.len());
        match rng.gen_range(0..7) {
            0 if !bytes.is_empty() => {
                let i = rng.gen_range(0..bytes.len());
                bytes[i] ^= 1 << rng.gen_range(0..8);
            }
            1 => bytes.truncate(at),
            2 => {
                let noise = body(rng, 40);
                bytes.splice(at..at, noise);
            }
            3 => {
                let piece: &[u8] = [
                    &b"\r\n"[..],
                    b"Content-Length: 5\r\n",
                    b"Content-Length: -1\r\n",
                    b"Transfer-Encoding: gzip, chunked\r\n",
                    b"ffffffffffffffff\r\n",
                    b"HTTP/1.1 101 Switching\r\n\r\n",
                    b" folded\r\n",
                    b"\0",
                ][rng.gen_range(0..8)];
                bytes.splice(at..at, piece.iter().copied());
            }
            4 => {
                let end = rng.gen_range(at..=bytes.len());
                bytes.drain(at..end);
            }
            5 => {
                // A long run of one byte: a head or chunk line without end.
                let run = vec![b"a:\r\n"[rng.gen_range(0..4)]; rng.gen_range(1..80_000)];
                bytes.splice(at..at, run);
            }
            _ => bytes.extend_from_slice(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"),
        }
    }
    bytes
}

#[test]
fn any_bytes_are_read_to_an_answer_or_an_error_within_the_limits() {
    let mut rng = StdRng::seed_from_u64(0x7e57_0042);
    for case in 0..cases() {
        let bytes = if rng.gen_bool(0.1) {
            body(&mut rng, 200)
        } else {
            let whole = answer(&mut rng).0;
            mutate(&mut rng, whole)
        };
        let head_only = rng.gen_bool(0.1);
        let started = Instant::now();
        let read = read_answer_bytes(&bytes, head_only, LIMIT);
        assert!(started.elapsed() < Duration::from_secs(2), "case {case} took {:?}", started.elapsed());
        match read {
            Ok((answer, reusable)) => {
                assert!(answer.body.len() <= LIMIT, "case {case}");
                assert!(!answer.response.status.is_informational(), "case {case}: an interim answer returned");
                assert!(!(answer.truncated && reusable), "case {case}: a cut body leaves unread bytes behind");
                if head_only {
                    assert!(answer.body.is_empty(), "case {case}: a HEAD answer has no body");
                }
            }
            Err(message) => assert!(!message.is_empty(), "case {case}"),
        }
    }
}

#[test]
fn a_body_framed_by_length_or_chunks_of_any_sizes_reads_back_whole() {
    let mut rng = StdRng::seed_from_u64(0x7e57_0043);
    for case in 0..cases() {
        let (bytes, content) = answer(&mut rng);
        let (answer, reusable) = read_answer_bytes(&bytes, false, LIMIT).unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert_eq!(answer.response.status, 200, "case {case}");
        assert_eq!(answer.body, content, "case {case}");
        assert!(reusable, "case {case}: a whole keep-alive answer leaves the connection reusable");
        // Anything after the answer makes the connection unusable for the next one.
        let mut extra = bytes.clone();
        extra.push(b'x');
        let (_, reusable) = read_answer_bytes(&extra, false, LIMIT).unwrap_or_else(|e| panic!("case {case}: {e}"));
        assert!(!reusable, "case {case}: bytes past the answer");
    }
}
