ALTER TABLE "refresh_tokens" ADD COLUMN "access_token_id" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "superseded_access_token_ids" text[] DEFAULT '{}'::text[] NOT NULL;