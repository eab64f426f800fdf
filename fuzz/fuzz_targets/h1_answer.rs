//! The HTTP transport's HTTP/1.1 client reading whatever a receiver sends. The first byte
//! chooses the request's method (HEAD or not); the rest is the receiver's whole answer. The
//! properties are those of `transport/http/h1/properties.rs`: the reading ends with an answer
//! or an error, the body within its limit, no interim answer returned, a cut body never
//! leaving the connection reusable.
#![no_main]

use libfuzzer_sys::fuzz_target;
use taskexec::transport::http::read_answer_bytes;

const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&first, answer)) = data.split_first() else { return };
    let head_only = first & 1 == 1;
    if let Ok((answer, reusable)) = read_answer_bytes(answer, head_only, LIMIT) {
        assert!(answer.body.len() <= LIMIT);
        assert!(!answer.response.status.is_informational());
        assert!(!(answer.truncated && reusable));
        assert!(!head_only || answer.body.is_empty());
    }
});
