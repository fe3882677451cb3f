ALTER TABLE "mfa_tokens" ADD COLUMN "amr" text[] DEFAULT '{}'::text[] NOT NULL;--> statement-breakpoint
-- "ext" was never an RFC 8176 value: sessions of provider sign-ins made before now claim nothing instead.
UPDATE "sessions" SET "amr" = array_remove("amr", 'ext') WHERE 'ext' = ANY("amr");
