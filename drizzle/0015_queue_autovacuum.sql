-- The jobs table is a queue: every job is inserted, claimed, updated and finished within seconds, so its
-- dead row versions pile up far faster than the default autovacuum thresholds (20% of the table) allow
-- for, and every claim then walks them. Vacuum it (and the delivery log it drives) after 1% instead.
ALTER TABLE "jobs" SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.02);--> statement-breakpoint
ALTER TABLE "webhook_deliveries" SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.02);
