import assert from 'node:assert/strict';
import http from 'node:http';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import type { TestServer } from '../helpers.ts';

/** Real user-agent strings, as the browsers and preview fetchers send them. */
export const UA = {
  androidChrome:
    'Mozilla/5.0 (Linux; Android 14; Pixel 8 Pro) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.6367.82 Mobile Safari/537.36',
  androidFacebookInApp:
    'Mozilla/5.0 (Linux; Android 13; SM-S908B Build/TP1A.220624.014; wv) AppleWebKit/537.36 (KHTML, like Gecko) Version/4.0 Chrome/119.0.6045.193 Mobile Safari/537.36 [FB_IAB/FB4A;FBAV/442.0.0.33.113;]',
  androidCubot:
    'Mozilla/5.0 (Linux; Android 10; CUBOT X30) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.6099.144 Mobile Safari/537.36',
  iosSafari:
    'Mozilla/5.0 (iPhone; CPU iPhone OS 17_4_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4.1 Mobile/15E148 Safari/604.1',
  ipadSafari:
    'Mozilla/5.0 (iPad; CPU OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1',
  desktopChrome:
    'Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/124.0.0.0 Safari/537.36',
  macSafari:
    'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Safari/605.1.15',
  facebook: 'facebookexternalhit/1.1 (+http://www.facebook.com/externalhit_uatext.php)',
  slack: 'Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)',
  twitter: 'Twitterbot/1.0',
  whatsapp: 'WhatsApp/2.23.20.0 A',
  linkedin: 'LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)',
  discord: 'Mozilla/5.0 (compatible; Discordbot/2.0; +https://discordapp.com)',
} as const;

export const ANDROID_APP = {
  packageName: 'com.example.shop',
  sha256CertFingerprints: [
    '14:6D:E9:83:C5:73:06:50:D8:EE:B9:95:2F:34:FC:64:16:A0:83:42:E6:1D:BE:A8:8A:04:96:B2:3F:CF:44:E5',
  ],
};
export const IOS_APP = {
  teamId: 'ABCDE12345',
  bundleId: 'com.example.shop',
  appStoreId: '1234567890',
};

/** The host the test server calls its own (from the default SVC_PUBLIC_URL). */
export const DEFAULT_HOST = 'localhost:8080';

export function sdk(s: TestServer, key = s.project.serverKey, projectId = s.project.id) {
  const headers = { authorization: `Bearer ${key}`, 'x-project-id': projectId };
  return (
    method: InjectOptions['method'],
    url: string,
    payload?: unknown,
    extra: Partial<InjectOptions> = {},
  ) =>
    s.app.inject({
      method,
      url,
      ...(payload === undefined ? {} : { payload: payload as object }),
      ...extra,
      headers: { ...headers, ...(extra.headers ?? {}) },
    });
}

/** Creates a link through the SDK API (`call` from {@link sdk}); asserts 201 and returns it. */
export async function createLink(call: ReturnType<typeof sdk>, body: Record<string, unknown>) {
  const res = await call('POST', '/v1/sdk/links', body);
  assert.equal(res.statusCode, 201, res.body);
  return res.json();
}

/** An answer read over real HTTP. */
export interface HttpAnswer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * One request over real HTTP to the listening test server, following nothing. It sends the Host
 * header it is given (fetch may not), and goes through the socket and Node's HTTP parser as
 * users' requests do (`inject` skips both).
 */
export function httpRequest(
  port: number,
  path: string,
  headers: Record<string, string>,
  method = 'GET',
  /** `false`: a connection of its own, not one the global agent keeps alive. */
  agent?: false,
) {
  return new Promise<HttpAnswer>((resolve, reject) => {
    http
      .request({ host: '127.0.0.1', port, path, method, headers, agent }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk) => {
          body += chunk;
        });
        res.on('end', () => resolve({ status: res.statusCode!, headers: res.headers, body }));
      })
      .on('error', reject)
      .end();
  });
}

/** Asserts a problem+json refusal with this status and code; returns its body. */
export function refused(res: LightMyRequestResponse, status: number, code: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
  const body = res.json();
  assert.equal(body.code, code, res.body);
  return body;
}

/** Follows nothing: one GET of a short link, as a browser with `userAgent` would send it. */
export function visit(
  s: TestServer,
  path: string,
  userAgent: string,
  options: { host?: string; ip?: string } = {},
) {
  return s.app.inject({
    method: 'GET',
    url: path,
    headers: { host: options.host ?? DEFAULT_HOST, 'user-agent': userAgent },
    remoteAddress: options.ip ?? '203.0.113.7',
  });
}

/**
 * Digital Asset Links as Google documents them
 * (developers.google.com/digital-asset-links/v1/getting-started, developer.android.com App Links):
 * a JSON array of statements `{relation: [...], target: {namespace: "android_app", package_name,
 * sha256_cert_fingerprints: ["AB:CD:…" (32 upper-case hex pairs)]}}`.
 */
export function assertAssetLinksFormat(body: unknown) {
  assert.ok(Array.isArray(body), 'assetlinks.json is a JSON array');
  for (const statement of body as any[]) {
    assert.deepEqual(Object.keys(statement).sort(), ['relation', 'target']);
    assert.ok(Array.isArray(statement.relation));
    assert.ok(statement.relation.includes('delegate_permission/common.handle_all_urls'));
    assert.deepEqual(Object.keys(statement.target).sort(), [
      'namespace',
      'package_name',
      'sha256_cert_fingerprints',
    ]);
    assert.equal(statement.target.namespace, 'android_app');
    assert.match(
      statement.target.package_name,
      /^[A-Za-z][A-Za-z0-9_]*(\.[A-Za-z][A-Za-z0-9_]*)+$/,
    );
    assert.ok(statement.target.sha256_cert_fingerprints.length >= 1);
    for (const fp of statement.target.sha256_cert_fingerprints) {
      assert.match(fp, /^([0-9A-F]{2}:){31}[0-9A-F]{2}$/);
    }
  }
}

/**
 * The apple-app-site-association file as Apple documents it for iOS 13+
 * (developer.apple.com "Supporting associated domains", applinks): an object whose `applinks`
 * has `details`, each with `appIDs` (`<TeamID>.<BundleID>`) and `components` (objects with
 * `/`, `?`, `#`, `exclude`, `comment`).
 */
export function assertAasaFormat(body: any) {
  assert.equal(typeof body, 'object');
  assert.ok(body.applinks && Array.isArray(body.applinks.details));
  for (const detail of body.applinks.details) {
    assert.ok(Array.isArray(detail.appIDs) && detail.appIDs.length > 0);
    for (const id of detail.appIDs)
      assert.match(id, /^[A-Z0-9]{10}\.[A-Za-z0-9-]+(\.[A-Za-z0-9-]+)*$/);
    assert.ok(Array.isArray(detail.components) && detail.components.length > 0);
    for (const component of detail.components) {
      for (const key of Object.keys(component)) {
        assert.ok(['/', '?', '#', 'exclude', 'comment'].includes(key), `component key ${key}`);
      }
      assert.equal(typeof component['/'], 'string');
    }
  }
}
