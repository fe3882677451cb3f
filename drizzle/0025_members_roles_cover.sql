-- Custom migration (drizzle-kit has no INCLUDE): the member lists' keyset index also carries `roles`, so that a page
-- filtered by role (`GET /organizations/{id}/members?role=…`) is an index-only scan: in an organization of 100,000
-- members it reads index entries only, not a heap row for every member it passes over (3 to 5 times faster at
-- 1 admin in 1,000; see docs/performance.md, Organizations). Same name, same keys: schema.ts still describes it.
DROP INDEX IF EXISTS "organization_members_org_joined_idx";--> statement-breakpoint
CREATE INDEX "organization_members_org_joined_idx" ON "organization_members" USING btree ("organization_id","joined_at","user_id") INCLUDE ("roles");
