ALTER TABLE "oidc_flows" ADD COLUMN "link_session_id" uuid;--> statement-breakpoint
ALTER TABLE "sign_in_codes" ADD COLUMN "link_session_id" uuid;--> statement-breakpoint
ALTER TABLE "oidc_flows" ADD CONSTRAINT "oidc_flows_link_session_id_sessions_id_fk" FOREIGN KEY ("link_session_id") REFERENCES "public"."sessions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "sign_in_codes" ADD CONSTRAINT "sign_in_codes_link_session_id_sessions_id_fk" FOREIGN KEY ("link_session_id") REFERENCES "public"."sessions"("id") ON DELETE cascade ON UPDATE no action;