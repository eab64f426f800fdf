-- The check is in place since 0057 (PostgreSQL replaces it in two steps).
SELECT 1;
