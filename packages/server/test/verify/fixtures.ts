import assert from 'node:assert/strict';
import type { LightMyRequestResponse } from 'fastify';
import type { TestServer } from '../helpers.ts';

/** Real, valid numbers (libphonenumber) for tests: distinct per call. */
let counter = 0;
export function newNumber(): string {
  counter += 1;
  return `+336${String(12_000_000 + counter * 7 + Math.floor(Math.random() * 5)).padStart(8, '0')}`;
}

export function headers(s: TestServer, key = s.project.serverKey, projectId = s.project.id) {
  return { authorization: `Bearer ${key}`, 'x-project-id': projectId };
}

export function post(
  s: TestServer,
  url: string,
  payload: unknown,
  options: { key?: string; projectId?: string; ip?: string } = {},
) {
  return s.app.inject({
    method: 'POST',
    url: `/v1${url}`,
    headers: headers(s, options.key, options.projectId),
    payload: payload as object,
    remoteAddress: options.ip ?? '198.51.100.7',
  });
}

export function get(
  s: TestServer,
  url: string,
  options: { key?: string; projectId?: string } = {},
) {
  return s.app.inject({
    method: 'GET',
    url: `/v1${url}`,
    headers: headers(s, options.key, options.projectId),
  });
}

export async function problem(res: LightMyRequestResponse, status: number, code: string) {
  assert.equal(res.statusCode, status, res.body);
  assert.match(String(res.headers['content-type']), /^application\/problem\+json/);
  const body = res.json();
  assert.equal(body.code, code, res.body);
  return body;
}

/** The code in the newest console-sender message to `to` (read through the admin outbox). */
export async function lastCode(
  s: TestServer,
  to: string,
  projectId = s.project.id,
): Promise<string> {
  const outbox = await s.admin('GET', `/projects/${projectId}/verify/outbox`);
  const item = outbox.items.find((i: { to: string }) => i.to === to);
  assert.ok(item, `no message to ${to} in the outbox`);
  const m = /\b(\d{6})\b/.exec(item.body);
  assert.ok(m, item.body);
  return m[1];
}

export function wrongCode(code: string): string {
  return String((Number(code) + 1) % 1_000_000).padStart(6, '0');
}

export async function setVerifySettings(s: TestServer, verify: unknown, projectId = s.project.id) {
  return s.admin('PATCH', `/projects/${projectId}`, { settings: { verify } });
}
