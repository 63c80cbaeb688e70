import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLOSE_CODES, ERROR_CODES, isErrorCode } from '@svc/protocol';
import { errorOfClose } from '../src/channel.ts';
import { errorFromResponse, retryAfterMs } from '../src/errors.ts';
import { CLIENT_ERROR_CODES, SvcError } from '../src/index.ts';

test("the client's own codes never collide with the server's registry", () => {
  for (const code of CLIENT_ERROR_CODES) assert.equal(isErrorCode(code), false, code);
});

test('every refusal close code maps to a registry code with its status', () => {
  for (const [name, closeCode] of Object.entries(CLOSE_CODES)) {
    if (closeCode === CLOSE_CODES.NORMAL) continue;
    const err = errorOfClose({ closeCode });
    assert.ok(err instanceof SvcError);
    assert.equal(err.closeCode, closeCode);
    if (closeCode === CLOSE_CODES.TIMEOUT) {
      assert.equal(err.code, 'timeout');
      continue;
    }
    assert.ok(isErrorCode(err.code), `${name} (${closeCode}) → ${err.code}`);
    assert.equal(err.status, ERROR_CODES[err.code as keyof typeof ERROR_CODES].status);
  }
});

test('an error frame or session.closed explains a close better than its code', () => {
  const fromFrame = errorOfClose({
    closeCode: 4005,
    lastError: { type: 'error', code: 'room_full', message: 'full' },
  });
  assert.equal(fromFrame.code, 'room_full');
  assert.equal(fromFrame.message, 'full');
  const fromClosed = errorOfClose({
    closeCode: 4002,
    sessionClosed: { reason: 'TOKEN_EXPIRED', code: 'token_expired', closeCode: 4002 },
  });
  assert.equal(fromClosed.code, 'token_expired');
  assert.equal(errorOfClose({ closeCode: 1006 }).code, 'connection_closed');
});

test('Retry-After is read as delay-seconds or an HTTP date, and carried by the error', async () => {
  const now = Date.parse('2026-11-28T10:00:00Z');
  assert.equal(retryAfterMs('2', now), 2_000);
  assert.equal(retryAfterMs(' 0 ', now), 0);
  assert.equal(retryAfterMs('Sat, 28 Nov 2026 10:00:05 GMT', now), 5_000);
  assert.equal(retryAfterMs('Sat, 28 Nov 2026 09:59:00 GMT', now), 0, 'a past date: at once');
  for (const bad of [null, '', '-1', '1.5', 'soon'])
    assert.equal(retryAfterMs(bad, now), undefined);
  const problem = { type: 'about:blank', title: 'x', status: 503, code: 'service_unavailable' };
  const err = await errorFromResponse(
    new Response(JSON.stringify(problem), { status: 503, headers: { 'retry-after': '3' } }),
  );
  assert.equal(err.code, 'service_unavailable');
  assert.equal(err.retryAfterMs, 3_000);
  const bare = await errorFromResponse(new Response('busy', { status: 429 }));
  assert.equal(bare.retryAfterMs, undefined);
});
