/** Products a project can enable. Client keys may be scoped to the first three only. */
export const PRODUCTS = ['realtime', 'links', 'verify', 'mail', 'stream', 'video_editor'] as const;
export type Product = (typeof PRODUCTS)[number];

/** Products a client (publishable) key can be scoped to. */
export const CLIENT_SCOPES = ['realtime', 'links', 'verify'] as const;
export type ClientScope = (typeof CLIENT_SCOPES)[number];

/** Key types as shown by the admin API. Legacy keys act as server keys. */
export const KEY_TYPES = ['client', 'server', 'legacy'] as const;
export type KeyType = (typeof KEY_TYPES)[number];
