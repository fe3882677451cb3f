-- Event types and the reasons of failed logins are kebab-case like every other name of the contract: rename
-- those that were not.
-- The trail stays append-only for everyone else; only this one-time rename passes the trigger.
ALTER TABLE "audit_events" DISABLE TRIGGER "audit_events_no_update_or_delete";
--> statement-breakpoint
UPDATE "audit_events" SET "type" = 'user.signed-up' WHERE "type" = 'user.signed_up';
--> statement-breakpoint
UPDATE "audit_events" SET "type" = 'token.reuse-detected' WHERE "type" = 'token.reuse_detected';
--> statement-breakpoint
UPDATE "audit_events" SET "details" = jsonb_set("details", '{reason}', to_jsonb(replace("details"->>'reason', '_', '-')))
	WHERE "type" = 'login.failed' AND "details"->>'reason' IN ('unknown_email', 'wrong_password', 'credentials_changed', 'wrong_current_password');
--> statement-breakpoint
ALTER TABLE "audit_events" ENABLE TRIGGER "audit_events_no_update_or_delete";
