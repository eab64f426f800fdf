-- What the worker's claims and results write on an endpoint's row, shared by both backends
-- (the claims themselves, leases and a batch's fenced results are each backend's own:
-- postgres/claim.rs and postgres/statements.rs, sqlite.rs). Index: endpoints' primary key.

-- What a claim took of a rate-limited endpoint's bucket: $2 the tokens left as of $3.
-- name: EndpointTokensSpend
UPDATE endpoints SET rate_tokens = $2, rate_tokens_at = $3 WHERE name = $1;

-- The circuit breaker's state after a batch of results (`flow::circuit`).
-- name: EndpointCircuitWrite
UPDATE endpoints
SET circuit_failures = $2, circuit_failing_since = $3, circuit_open_until = $4,
    circuit_cooldown_ms = $5, circuit_last_error = $6, disabled_at = $7
WHERE name = $1;
