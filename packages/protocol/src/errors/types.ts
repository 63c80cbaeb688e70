/** An error code's HTTP status and one-line meaning (the problem's `title`). */
export type ErrorDefinitions = Record<string, { status: number; title: string }>;
