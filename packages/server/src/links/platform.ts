import { LINK_APP_PLATFORMS, type LinkAppPlatform } from '@svc/protocol';

/**
 * Every platform a click is classified as, in one table that every part of Links reads: the
 * app platforms (`LINK_APP_PLATFORMS`, the wire contract's: store redirects, association files,
 * deferred matching), then desktop browsers and link-preview bots. A platform added to the
 * contract is a new app platform everywhere at once.
 */
export const PLATFORMS = [...LINK_APP_PLATFORMS, 'desktop', 'bot'] as const;
export type Platform = (typeof PLATFORMS)[number];

/** True for the platforms whose clicks can be matched to an app install. */
export function isAppPlatform(platform: Platform): platform is LinkAppPlatform {
  return (LINK_APP_PLATFORMS as readonly string[]).includes(platform);
}

// Link-preview fetchers and crawlers, by the names they send. Checked before the mobile tests:
// several (WhatsApp, Telegram) also mention a mobile OS.
const PREVIEW_BOTS =
  /facebookexternalhit|facebookcatalog|facebot|twitterbot|slackbot|slack-imgproxy|linkedinbot|discordbot|telegrambot|whatsapp|skypeuripreview|pinterest|redditbot|applebot|googlebot|google-inspectiontool|bingbot|duckduckbot|yandex|baiduspider|embedly|vkshare|iframely|mastodon|bluesky|cardyb|snapchat|viber|line-poker|kakaotalk-scrap|tumblr|quora link preview|outbrain|w3c_validator|bitlybot|ahrefsbot|semrushbot|petalbot|headlesschrome|lighthouse/i;
// Generic markers, only trusted when the agent is not a phone (a "Cubot" phone is not a bot).
const GENERIC_BOT = /(?:^|[^a-z])(?:bot|crawler|spider|preview|fetcher)(?:[^a-z]|$)/i;

/** How each app platform's user agents are recognised, tried in this order. */
const APP_AGENTS: Record<LinkAppPlatform, RegExp> = {
  // iOS first: an iPad's agent may also name another OS in its compatibility tokens.
  ios: /\b(?:iPhone|iPad|iPod)\b/,
  android: /\bAndroid\b/,
};

// The same few agents arrive again and again: the answers for the last ones seen.
const CACHE_MAX = 2000;
const cache = new Map<string, Platform>();

/** Classifies a request by its `User-Agent`; an absent or unknown agent counts as desktop. */
export function detectPlatform(userAgent: string | undefined): Platform {
  if (!userAgent) return 'desktop';
  let platform = cache.get(userAgent);
  if (platform === undefined) {
    platform = classify(userAgent);
    if (cache.size >= CACHE_MAX) cache.clear();
    if (userAgent.length <= 512) cache.set(userAgent, platform);
  }
  return platform;
}

function classify(userAgent: string): Platform {
  if (PREVIEW_BOTS.test(userAgent)) return 'bot';
  for (const platform of Object.keys(APP_AGENTS) as LinkAppPlatform[]) {
    if (APP_AGENTS[platform].test(userAgent)) return platform;
  }
  if (GENERIC_BOT.test(userAgent)) return 'bot';
  return 'desktop';
}
