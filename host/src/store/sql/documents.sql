-- Setup documents: payload specs, configs and secrets, each a named row an endpoint refers to.
-- Indexes: each table's primary key (name); endpoints' payload_spec_ref and config_ref, and
-- endpoint_secret_refs' secret, for the references that refuse a delete.

-- name: PayloadSpecInsert
INSERT INTO payload_specs (name, schema_json, created_at, updated_at)
VALUES ($1, $2, $3, $3)
ON CONFLICT (name) DO NOTHING
RETURNING name, schema_json, created_at, updated_at;

-- name: PayloadSpecGet
SELECT name, schema_json, created_at, updated_at FROM payload_specs WHERE name = $1;

-- name: PayloadSpecUpdate
UPDATE payload_specs SET schema_json = $2, updated_at = $3 WHERE name = $1
RETURNING name, schema_json, created_at, updated_at;

-- $2: how many to name.
-- name: PayloadSpecUsers
SELECT name FROM endpoints WHERE payload_spec_ref = $1 ORDER BY name LIMIT $2;

-- name: PayloadSpecDelete
DELETE FROM payload_specs WHERE name = $1;

-- name: ConfigInsert
INSERT INTO configs (name, values_json, created_at, updated_at)
VALUES ($1, $2, $3, $3)
ON CONFLICT (name) DO NOTHING
RETURNING name, values_json, created_at, updated_at;

-- name: ConfigGet
SELECT name, values_json, created_at, updated_at FROM configs WHERE name = $1;

-- name: ConfigUpdate
UPDATE configs SET values_json = $2, updated_at = $3 WHERE name = $1
RETURNING name, values_json, created_at, updated_at;

-- name: ConfigUsers
SELECT name FROM endpoints WHERE config_ref = $1 ORDER BY name LIMIT $2;

-- name: ConfigDelete
DELETE FROM configs WHERE name = $1;

-- A secret's value is only ever its encrypted envelope.
-- name: SecretInsert
INSERT INTO secrets (name, encrypted_value, created_at, updated_at, allowed_hosts)
VALUES ($1, $2, $3, $3, $4)
ON CONFLICT (name) DO NOTHING
RETURNING name, encrypted_value, allowed_hosts, created_at, updated_at;

-- name: SecretGet
SELECT name, encrypted_value, allowed_hosts, created_at, updated_at FROM secrets WHERE name = $1;

-- name: SecretExists
SELECT name FROM secrets WHERE name = $1;

-- $4: whether to set allowed_hosts to $5 (false keeps it).
-- name: SecretUpdate
UPDATE secrets SET encrypted_value = $2, updated_at = $3,
  allowed_hosts = CASE WHEN $4 THEN $5 ELSE allowed_hosts END
WHERE name = $1
RETURNING name, encrypted_value, allowed_hosts, created_at, updated_at;

-- Compare-and-set on the ciphertext; updated_at stays (the value did not change, only the key
-- it is sealed under).
-- name: SecretReencrypt
UPDATE secrets SET encrypted_value = $3 WHERE name = $1 AND encrypted_value = $2;

-- name: SecretUsers
SELECT endpoint FROM endpoint_secret_refs WHERE secret = $1 ORDER BY endpoint LIMIT $2;

-- name: SecretDelete
DELETE FROM secrets WHERE name = $1;
