ALTER TABLE "email_tokens" DROP CONSTRAINT "email_tokens_purpose_valid";--> statement-breakpoint
ALTER TABLE "factors" ADD COLUMN "added_unverified" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "factors" ADD COLUMN "added_aal" text;--> statement-breakpoint
ALTER TABLE "factors" ADD COLUMN "activated_at" timestamp (3) with time zone;--> statement-breakpoint
ALTER TABLE "identities" ADD COLUMN "added_unverified" boolean DEFAULT false NOT NULL;--> statement-breakpoint
ALTER TABLE "identities" ADD COLUMN "added_aal" text;--> statement-breakpoint
ALTER TABLE "oidc_flows" ADD COLUMN "link_aal" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "authenticated_at" timestamp (3) with time zone DEFAULT now() NOT NULL;--> statement-breakpoint
ALTER TABLE "sign_in_codes" ADD COLUMN "link_aal" text;--> statement-breakpoint
ALTER TABLE "webauthn_challenges" ADD COLUMN "session_id" uuid;--> statement-breakpoint
ALTER TABLE "email_tokens" ADD CONSTRAINT "email_tokens_purpose_valid" CHECK ("email_tokens"."purpose" in ('verification', 'recovery', 'email-change', 'reauthentication'));--> statement-breakpoint
-- Sessions that exist already were last checked when they began; factors already active count from their creation.
UPDATE "sessions" SET "authenticated_at" = "created_at";--> statement-breakpoint
UPDATE "factors" SET "activated_at" = "created_at" WHERE "status" = 'active';
