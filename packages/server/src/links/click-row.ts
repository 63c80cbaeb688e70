import type { LinkClicksTable } from './tables.ts';

/** The `link_clicks` columns, in the order a queued click carries its values. */
export const CLICK_COLUMNS = [
  'id',
  'project_id',
  'link_id',
  'platform',
  'fingerprint',
  'created_at',
  'claimed_at',
] as const;

/** A click as queued: its values in {@link CLICK_COLUMNS} order (no object per click). */
export type ClickRow = [
  id: string,
  projectId: string,
  linkId: string,
  platform: LinkClicksTable['platform'],
  fingerprint: string,
  createdAt: string,
  claimedAt: null,
];
