DROP INDEX "oauth_artifacts_uid_idx";--> statement-breakpoint
CREATE INDEX "oauth_artifacts_model_uid_idx" ON "oauth_artifacts" USING btree ("model","uid");