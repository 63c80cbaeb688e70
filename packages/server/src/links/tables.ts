/** Links tables (see storage/schema.ts for the column conventions). */

export interface LinksTable {
  id: string;
  project_id: string;
  /** The link domain (host, with port when not default); unique with `slug`. */
  domain: string;
  slug: string;
  url: string;
  /** JSON objects, or null. */
  android: string | null;
  ios: string | null;
  /** JSON object (the deep-link data). */
  params: string;
  utm: string | null;
  social: string | null;
  expires_at: string | null;
  /** Unique per project when set. */
  external_id: string | null;
  created_at: string;
  updated_at: string;
}

/** One redirect served: the click id travels through the store to the first app open. */
export interface LinkClicksTable {
  /** The click id (`clk_…`). */
  id: string;
  project_id: string;
  link_id: string;
  platform: 'android' | 'ios' | 'desktop' | 'bot';
  /** HMAC-SHA256(server secret, IP + user agent), base64url. Never the raw IP. */
  fingerprint: string;
  created_at: string;
  /** Set once, atomically, when a first app open claims this click. */
  claimed_at: string | null;
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
  link_events: LinkEventsTable;
  link_devices: LinkDevicesTable;
};
