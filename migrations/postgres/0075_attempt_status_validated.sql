-- The check 0074 added NOT VALID, validated apart from it (see there): SHARE UPDATE EXCLUSIVE,
-- so attempts go on being written while the history is read.
ALTER TABLE attempts VALIDATE CONSTRAINT chk_attempt_status;
