-- A CRON job's catch-up policy for missed ticks: all | latest | none (domain::CatchupPolicy).
ALTER TABLE jobs ADD COLUMN catchup_policy TEXT NOT NULL DEFAULT 'all';
