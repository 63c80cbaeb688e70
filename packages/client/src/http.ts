import { errorFromResponse, SvcError } from './errors.ts';
import type { SvcConfig } from './types.ts';

export type FetchFn = typeof globalThis.fetch;

/** The REST side: builds authenticated requests and maps failures to SvcError. */
export class RestClient {
  readonly apiBase: string;

  constructor(
    private readonly config: SvcConfig,
    private readonly fetchFn: FetchFn,
  ) {
    this.apiBase = apiBaseOf(config.baseUrl);
  }

  /** Sends a request to `<base>/v1<path>`; resolves with the JSON body (undefined for 204). */
  async request<T>(
    method: string,
    path: string,
    body?: unknown,
    extraHeaders: Record<string, string> = {},
  ): Promise<T> {
    const headers: Record<string, string> = {
      accept: 'application/json',
      authorization: `Bearer ${this.config.apiKey}`,
      'x-project-id': this.config.projectId,
      ...extraHeaders,
    };
    if (this.config.bundleId) headers['x-bundle-id'] = this.config.bundleId;
    if (body !== undefined) headers['content-type'] = 'application/json';
    let res: Response;
    try {
      res = await this.fetchFn(`${this.apiBase}${path}`, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      throw new SvcError('network_error', `${method} ${path}: ${(err as Error).message}`);
    }
    if (!res.ok) throw await errorFromResponse(res);
    return readJsonBody<T>(res, method, path);
  }
}

/** A successful answer's JSON body (undefined for 204 or no body); `invalid_response` if not JSON. */
export async function readJsonBody<T>(res: Response, method: string, path: string): Promise<T> {
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  if (!text) return undefined as T;
  try {
    return JSON.parse(text) as T;
  } catch {
    throw new SvcError('invalid_response', `${method} ${path}: the body is not JSON`, {
      status: res.status,
      requestId: res.headers.get('request-id') ?? undefined,
    });
  }
}

/** `https://h/`, `https://h/v1`, `https://h/v1/` → `https://h/v1`. */
export function apiBaseOf(baseUrl: string): string {
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`SvcConfig.baseUrl is not a URL: "${baseUrl}"`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') {
    throw new TypeError('SvcConfig.baseUrl must be http(s)');
  }
  const path = url.pathname.replace(/\/+$/, '').replace(/\/v1$/, '');
  return `${url.origin}${path}/v1`;
}
