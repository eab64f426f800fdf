-- Where a secret may be sent: a JSON array of host names, `*.domain` wildcards and addresses;
-- NULL for anywhere (secret::hosts).
ALTER TABLE secrets ADD COLUMN allowed_hosts TEXT;
