-- How late (seconds) a tick may be and still be made; NULL: no limit (under `none`, 60 s).
ALTER TABLE jobs ADD COLUMN catchup_window_sec INT;
