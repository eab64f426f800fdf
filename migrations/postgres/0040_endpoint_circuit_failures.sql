-- Failed deliveries since the endpoint's last success.
ALTER TABLE endpoints ADD COLUMN circuit_failures INT NOT NULL DEFAULT 0;
