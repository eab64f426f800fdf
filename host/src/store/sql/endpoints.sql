-- Endpoints: where executions are delivered, each version kept (jobs are delivered with the
-- version they were created against), with the flow-control state the workers share (a 429's
-- pause, the owner's pause, circuit breaker, disabling). Indexes: endpoints' primary key (name); endpoint_versions'
-- (name, version); endpoint_secret_refs' (endpoint, secret) and its secret index; jobs'
-- idx_jobs_endpoint.

-- name: EndpointInsert
INSERT INTO endpoints
    (name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
     plugin, renderer, max_concurrency, on_failure, rate_limit_per_sec, rate_limit_burst, circuit_policy,
     timeout_ms, plugin_version, classifier, classifier_version, classifier_config, concurrency)
VALUES ($1, $2, $3, $4, $5, $6, 1, $7, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20)
ON CONFLICT (name) DO NOTHING
RETURNING name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
          plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
          circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
          circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
          classifier_config, concurrency;

-- A new version of the endpoint: $7 its time; the version number goes up by one.
-- name: EndpointUpdate
UPDATE endpoints
SET endpoint_type = $2, payload_spec_ref = $3, config_ref = $4, spec = $5,
    retry_policy = $6, version = version + 1, updated_at = $7, plugin = $8, renderer = $9,
    max_concurrency = $10, on_failure = $11, rate_limit_per_sec = $12, rate_limit_burst = $13,
    circuit_policy = $14, timeout_ms = $15, plugin_version = $16, classifier = $17,
    classifier_version = $18, classifier_config = $19, concurrency = $20
WHERE name = $1
RETURNING name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
          plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
          circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
          circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
          classifier_config, concurrency;

-- Keep the endpoint's version as just written.
-- name: EndpointVersionSnapshot
INSERT INTO endpoint_versions (name, version, endpoint_type, payload_spec_ref, config_ref, spec,
    retry_policy, plugin, renderer, created_at, max_concurrency, timeout_ms, plugin_version,
    classifier, classifier_version, classifier_config)
SELECT name, version, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, plugin,
    renderer, updated_at, max_concurrency, timeout_ms, plugin_version,
    classifier, classifier_version, classifier_config
FROM endpoints WHERE name = $1;

-- name: EndpointSecretRefsDelete
DELETE FROM endpoint_secret_refs WHERE endpoint = $1;

-- name: EndpointSecretRefInsert
INSERT INTO endpoint_secret_refs (endpoint, secret) VALUES ($1, $2);

-- name: EndpointGet
SELECT name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
       plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
       circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
       circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
       classifier_config, concurrency
FROM endpoints WHERE name = $1;

-- One version, shaped as an endpoint row: a version's updated_at is when it was written. Its
-- failure callback, pause, rate limit and circuit are the endpoint's as it is now.
-- name: EndpointVersionGet
SELECT v.name, v.endpoint_type, v.payload_spec_ref, v.config_ref, v.spec, v.retry_policy, v.version,
    v.created_at, v.created_at AS updated_at, v.plugin, v.renderer, v.max_concurrency,
    e.on_failure, e.paused_until, e.rate_limit_per_sec, e.rate_limit_burst, e.circuit_policy,
    e.circuit_failures, e.circuit_failing_since, e.circuit_open_until, e.circuit_cooldown_ms,
    e.circuit_last_error, e.disabled_at, e.paused_at, v.timeout_ms, v.plugin_version, v.classifier,
    v.classifier_version, v.classifier_config, e.concurrency
FROM endpoint_versions v JOIN endpoints e ON e.name = v.name
WHERE v.name = $1 AND v.version = $2;

-- Never shortened: of two 429s, the later Retry-After holds.
-- name: EndpointPause
UPDATE endpoints SET paused_until = $2
WHERE name = $1 AND (paused_until IS NULL OR paused_until < $2);

-- Paused by its owner: the first time is kept. $1 the name, $2 now.
-- name: EndpointHold
UPDATE endpoints SET paused_at = COALESCE(paused_at, $2) WHERE name = $1
RETURNING name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
          plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
          circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
          circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
          classifier_config, concurrency;

-- name: EndpointRelease
UPDATE endpoints SET paused_at = NULL WHERE name = $1
RETURNING name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
          plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
          circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
          circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
          classifier_config, concurrency;

-- name: EndpointEnable
UPDATE endpoints
SET disabled_at = NULL, disabled_announced_at = NULL, circuit_failures = 0, circuit_failing_since = NULL,
    circuit_open_until = NULL, circuit_cooldown_ms = NULL, circuit_last_error = NULL, paused_until = NULL
WHERE name = $1
RETURNING name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
          plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
          circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
          circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
          classifier_config, concurrency;

-- name: EndpointsDisabledUnannounced
SELECT name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
       plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
       circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
       circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
       classifier_config, concurrency
FROM endpoints
WHERE disabled_at IS NOT NULL AND disabled_announced_at IS NULL
ORDER BY disabled_at, name
LIMIT $1;

-- Only that disabling: an endpoint enabled and disabled again meanwhile is announced again.
-- name: EndpointDisabledAnnounced
UPDATE endpoints SET disabled_announced_at = $3 WHERE name = $1 AND disabled_at = $2;

-- name: EndpointCircuitsNotClosed
SELECT name, endpoint_type, payload_spec_ref, config_ref, spec, retry_policy, version, created_at, updated_at,
       plugin, renderer, max_concurrency, on_failure, paused_until, rate_limit_per_sec, rate_limit_burst,
       circuit_policy, circuit_failures, circuit_failing_since, circuit_open_until, circuit_cooldown_ms,
       circuit_last_error, disabled_at, paused_at, timeout_ms, plugin_version, classifier, classifier_version,
       classifier_config, concurrency
FROM endpoints
WHERE circuit_open_until IS NOT NULL OR disabled_at IS NOT NULL
ORDER BY name;

-- name: EndpointConcurrencyLimits
SELECT name, max_concurrency FROM endpoints WHERE max_concurrency IS NOT NULL;

-- The endpoint, held for its delete.
-- name: EndpointHeldForDelete
SELECT name FROM endpoints WHERE name = $1/*{lock_exclusive}*/;

-- Its jobs, held for their delete, in the lock order (job id).
-- name: EndpointJobsHeldForDelete
SELECT job_id FROM jobs WHERE endpoint = $1 ORDER BY job_id/*{lock_exclusive}*/;

-- Its jobs that still have deliveries to make: an active cron job, or a job with an unfinished
-- execution. $2: how many to name.
-- name: EndpointJobsActive
SELECT job_id FROM jobs j
WHERE endpoint = $1
  AND ((j.trigger_type = 'CRON' AND j.status = 'ACTIVE')
       OR EXISTS (SELECT 1 FROM executions x WHERE x.job_id = j.job_id
                  AND x.status IN ('PENDING', 'QUEUED', 'RETRYING'))
       OR EXISTS (SELECT 1 FROM executions x WHERE x.job_id = j.job_id AND x.status = 'RUNNING'))
ORDER BY created_at DESC LIMIT $2;

-- Other endpoints that send it their failures. $2: how many to name.
-- name: EndpointFailureCallers
SELECT name FROM endpoints WHERE on_failure = $1 AND name <> $1 ORDER BY name LIMIT $2;

-- name: EndpointJobsDelete
DELETE FROM jobs WHERE endpoint = $1;

-- name: EndpointDelete
DELETE FROM endpoints WHERE name = $1;
