import { defineConfig } from 'drizzle-kit'

// Only `drizzle-kit generate` uses this; the service applies drizzle/ itself at start-up.
export default defineConfig({
	dialect: 'postgresql',
	schema: './src/db/schema.ts',
	out: './drizzle',
})
