CREATE TABLE "import_checkpoints" (
	"key" text PRIMARY KEY NOT NULL,
	"last_line" integer NOT NULL,
	"counts" jsonb DEFAULT '{}'::jsonb NOT NULL,
	"updated_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
