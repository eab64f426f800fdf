-- A CRON job's overlap policy: allow | skip | buffer_one (see domain::OverlapPolicy).
ALTER TABLE jobs ADD COLUMN overlap_policy TEXT NOT NULL DEFAULT 'allow';
