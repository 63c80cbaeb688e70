/** Where a redirect request came from, as far as its user agent tells. */
export type Platform = 'android' | 'ios' | 'desktop' | 'bot';

// Link-preview fetchers and crawlers, by the names they send. Checked before the mobile tests:
// several (WhatsApp, Telegram) also mention a mobile OS.
const PREVIEW_BOTS =
  /facebookexternalhit|facebookcatalog|facebot|twitterbot|slackbot|slack-imgproxy|linkedinbot|discordbot|telegrambot|whatsapp|skypeuripreview|pinterest|redditbot|applebot|googlebot|google-inspectiontool|bingbot|duckduckbot|yandex|baiduspider|embedly|vkshare|iframely|mastodon|bluesky|cardyb|snapchat|viber|line-poker|kakaotalk-scrap|tumblr|quora link preview|outbrain|w3c_validator|bitlybot|ahrefsbot|semrushbot|petalbot|headlesschrome|lighthouse/i;
// Generic markers, only trusted when the agent is not a phone (a "Cubot" phone is not a bot).
const GENERIC_BOT = /(?:^|[^a-z])(?:bot|crawler|spider|preview|fetcher)(?:[^a-z]|$)/i;
const IOS = /\b(?:iPhone|iPad|iPod)\b/;
const ANDROID = /\bAndroid\b/;

// The same few agents arrive again and again: remember the answer for the last ones seen.
const CACHE_MAX = 2000;
const cache = new Map<string, Platform>();

/** Classifies a request by its `User-Agent`; an absent or unknown agent counts as desktop. */
export function detectPlatform(userAgent: string | undefined): Platform {
  if (!userAgent) return 'desktop';
  let platform = cache.get(userAgent);
  if (platform === undefined) {
    platform = classify(userAgent);
    if (userAgent.length <= 512) {
      if (cache.size >= CACHE_MAX) cache.clear();
      cache.set(userAgent, platform);
    }
  }
  return platform;
}

function classify(userAgent: string): Platform {
  if (PREVIEW_BOTS.test(userAgent)) return 'bot';
  if (IOS.test(userAgent)) return 'ios';
  if (ANDROID.test(userAgent)) return 'android';
  if (GENERIC_BOT.test(userAgent)) return 'bot';
  return 'desktop';
}
