import type { Platform } from './platform.ts';

/** A link (see storage/schema.ts for the column conventions). */
export interface LinksTable {
  id: string;
  project_id: string;
  /** The link domain (host, with port when not default); unique with `slug`. */
  domain: string;
  slug: string;
  url: string;
  /** JSON objects (`params`: the deep-link data), or null. */
  android: string | null;
  ios: string | null;
  params: string;
  utm: string | null;
  social: string | null;
  expires_at: string | null;
  /** Unique per project when set. */
  external_id: string | null;
  created_at: string;
  updated_at: string;
}

/**
 * Every redirect that recorded a click, written in batches (see clicks.ts). Its id is a ULID
 * (`clk_…`), so it sorts by time: pruning and the start-up read of recent clicks go by id. The
 * fingerprint is a keyed hash of IP and user agent, never the raw IP. Pruned after the longest
 * referrer window; the day counts stay.
 */
export interface LinkClicksTable {
  id: string;
  project_id: string;
  link_id: string;
  platform: Platform;
  fingerprint: string;
}

/** A click matched to an app install: at most one row, and so one install, per click. */
export interface LinkClickClaimsTable {
  click_id: string;
  project_id: string;
  link_id: string;
  claimed_at: string;
}

/** Clicks per link and UTC day (`YYYY-MM-DD`): what stats read. */
export interface LinkClickDaysTable {
  link_id: string;
  day: string;
  clicks: number;
}

/** Events reported by apps (install, open, reinstall, custom, click). */
export interface LinkEventsTable {
  id: string;
  project_id: string;
  link_id: string;
  type: 'click' | 'install' | 'open' | 'reinstall' | 'custom';
  name: string | null;
  /** JSON object or null. */
  properties: string | null;
  click_id: string | null;
  created_at: string;
}

/** Devices that reported a first open, so a second one is counted as a reinstall. */
export interface LinkDevicesTable {
  project_id: string;
  /** SHA-256 of the app-supplied device id, base64url. */
  device_hash: string;
  first_seen_at: string;
}

export type LinksTables = {
  links: LinksTable;
  link_clicks: LinkClicksTable;
  link_click_claims: LinkClickClaimsTable;
  link_click_days: LinkClickDaysTable;
  link_events: LinkEventsTable;
  link_devices: LinkDevicesTable;
};

declare module '../storage/schema.ts' {
  /** Links's tables are part of the database. */
  interface Database extends LinksTables {}
}
