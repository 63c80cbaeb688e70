import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { build } from 'esbuild';
import { type BrowserContext, chromium, type Page } from 'playwright-core';

/** @svc/client and the test page, bundled for the browser once per test file. */
export async function bundlePage(): Promise<string> {
  const result = await build({
    entryPoints: [path.join(import.meta.dirname, 'media-page', 'page.ts')],
    bundle: true,
    write: false,
    format: 'iife',
    platform: 'browser',
    target: 'chrome120',
    logLevel: 'silent',
  });
  return result.outputFiles[0]!.text;
}

const ARGS = [
  '--headless=new',
  '--no-sandbox',
  '--disable-gpu',
  '--use-fake-ui-for-media-stream',
  '--use-fake-device-for-media-stream',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
  '--autoplay-policy=no-user-gesture-required',
  // The page is fulfilled by Playwright's router (no address space), which Local Network Access
  // would then treat as public and block its WebSocket to 127.0.0.1.
  '--disable-features=LocalNetworkAccessChecks,LocalNetworkAccessChecksWebSockets',
];

export interface TestBrowser {
  context: BrowserContext;
  page: Page;
  close(): Promise<void>;
}

/**
 * A headless Debian Chromium with fake camera, microphone and screen, showing the test page at
 * `origin` (the Svc server's own origin, so REST and WebSocket calls are same-origin; the page
 * itself is served by Playwright's router, not the server).
 */
export async function openBrowser(origin: string, bundle: string): Promise<TestBrowser> {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), 'svcm-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: false,
    args: ARGS,
    timeout: 30_000,
  });
  try {
    const page = context.pages()[0] ?? (await context.newPage());
    await page.route(`${origin}/__svcm/**`, (route) => {
      const url = route.request().url();
      if (url.endsWith('/page.js')) {
        return route.fulfill({ contentType: 'text/javascript', body: bundle });
      }
      return route.fulfill({
        contentType: 'text/html',
        body: '<!doctype html><html><body><script src="/__svcm/page.js"></script></body></html>',
      });
    });
    await page.goto(`${origin}/__svcm/index.html`);
    await page.waitForFunction(() => 'svcm' in window);
    return {
      context,
      page,
      async close() {
        await context.close().catch(() => {});
        fs.rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (err) {
    await context.close().catch(() => {});
    fs.rmSync(profile, { recursive: true, force: true });
    throw err;
  }
}

export function browserTestsPossible(): string | null {
  return fs.existsSync('/usr/bin/chromium') ? null : 'needs Debian chromium';
}
