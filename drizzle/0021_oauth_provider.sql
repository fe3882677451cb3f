CREATE TABLE "oauth_artifacts" (
	"model" text NOT NULL,
	"id" text NOT NULL,
	"payload" jsonb NOT NULL,
	"grant_id" text,
	"user_code" text,
	"uid" text,
	"expires_at" timestamp (3) with time zone,
	"consumed_at" timestamp (3) with time zone,
	CONSTRAINT "oauth_artifacts_model_id_pk" PRIMARY KEY("model","id")
);
--> statement-breakpoint
CREATE TABLE "oauth_client_secrets" (
	"id" uuid PRIMARY KEY NOT NULL,
	"client_id" uuid NOT NULL,
	"secret_hash" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"expires_at" timestamp (3) with time zone
);
--> statement-breakpoint
CREATE TABLE "oauth_clients" (
	"id" uuid PRIMARY KEY NOT NULL,
	"client_id" text NOT NULL,
	"name" text NOT NULL,
	"type" text NOT NULL,
	"redirect_uris" text[] DEFAULT '{}'::text[] NOT NULL,
	"post_logout_redirect_uris" text[] DEFAULT '{}'::text[] NOT NULL,
	"backchannel_logout_uri" text,
	"grant_types" text[] NOT NULL,
	"scopes" text[] NOT NULL,
	"token_endpoint_auth_method" text NOT NULL,
	"jwks_uri" text,
	"first_party" boolean DEFAULT false NOT NULL,
	"id_token_signed_response_alg" text,
	"logo_uri" text,
	"dynamic" boolean DEFAULT false NOT NULL,
	"status" text DEFAULT 'active' NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE TABLE "oauth_consents" (
	"user_id" uuid NOT NULL,
	"client_id" uuid NOT NULL,
	"scopes" text[] NOT NULL,
	"granted_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "client_id" text;--> statement-breakpoint
ALTER TABLE "sessions" ADD COLUMN "browser_token_hash" text;--> statement-breakpoint
ALTER TABLE "oauth_client_secrets" ADD CONSTRAINT "oauth_client_secrets_client_id_oauth_clients_id_fk" FOREIGN KEY ("client_id") REFERENCES "public"."oauth_clients"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "oauth_consents" ADD CONSTRAINT "oauth_consents_user_id_users_id_fk" FOREIGN KEY ("user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "oauth_consents" ADD CONSTRAINT "oauth_consents_client_id_oauth_clients_id_fk" FOREIGN KEY ("client_id") REFERENCES "public"."oauth_clients"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "oauth_artifacts_grant_id_idx" ON "oauth_artifacts" USING btree ("grant_id");--> statement-breakpoint
CREATE INDEX "oauth_artifacts_user_code_idx" ON "oauth_artifacts" USING btree ("user_code");--> statement-breakpoint
CREATE INDEX "oauth_artifacts_uid_idx" ON "oauth_artifacts" USING btree ("uid");--> statement-breakpoint
CREATE INDEX "oauth_artifacts_expires_at_idx" ON "oauth_artifacts" USING btree ("expires_at");--> statement-breakpoint
CREATE INDEX "oauth_client_secrets_client_id_idx" ON "oauth_client_secrets" USING btree ("client_id","created_at");--> statement-breakpoint
CREATE UNIQUE INDEX "oauth_clients_client_id_key" ON "oauth_clients" USING btree ("client_id");--> statement-breakpoint
CREATE INDEX "oauth_clients_created_at_idx" ON "oauth_clients" USING btree ("created_at","id");--> statement-breakpoint
CREATE UNIQUE INDEX "oauth_consents_user_client_key" ON "oauth_consents" USING btree ("user_id","client_id");--> statement-breakpoint
CREATE INDEX "oauth_consents_client_id_idx" ON "oauth_consents" USING btree ("client_id");--> statement-breakpoint
CREATE UNIQUE INDEX "sessions_browser_token_hash_key" ON "sessions" USING btree ("browser_token_hash");