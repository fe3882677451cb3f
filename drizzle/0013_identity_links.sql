ALTER TABLE "oidc_flows" ALTER COLUMN "browser_hash" DROP NOT NULL;--> statement-breakpoint
ALTER TABLE "oidc_flows" ADD COLUMN "link_user_id" uuid;--> statement-breakpoint
ALTER TABLE "sign_in_codes" ADD COLUMN "link_subject" text;--> statement-breakpoint
ALTER TABLE "sign_in_codes" ADD COLUMN "link_email" text;--> statement-breakpoint
ALTER TABLE "oidc_flows" ADD CONSTRAINT "oidc_flows_link_user_id_users_id_fk" FOREIGN KEY ("link_user_id") REFERENCES "public"."users"("id") ON DELETE no action ON UPDATE no action;