ALTER TABLE "users" ADD COLUMN "metadata" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "users" ADD COLUMN "app_metadata" jsonb DEFAULT '{}'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_metadata_object" CHECK (jsonb_typeof("users"."metadata") = 'object');--> statement-breakpoint
ALTER TABLE "users" ADD CONSTRAINT "users_app_metadata_object" CHECK (jsonb_typeof("users"."app_metadata") = 'object');