CREATE TABLE "code_failures" (
	"id" uuid PRIMARY KEY NOT NULL,
	"kind" text NOT NULL,
	"subject" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
--> statement-breakpoint
CREATE INDEX "code_failures_subject_idx" ON "code_failures" USING btree ("subject","kind","created_at");--> statement-breakpoint
CREATE INDEX "code_failures_created_idx" ON "code_failures" USING btree ("created_at");