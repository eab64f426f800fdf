-- When the failure notifier told the endpoint's on_failure endpoint that it was disabled.
ALTER TABLE endpoints ADD COLUMN disabled_announced_at TEXT;
