/** Verify tables (see storage/schema.ts for the column conventions). */
// biome-ignore lint/complexity/noBannedTypes: filled in as the area adds tables
export type VerifyTables = {};
