import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLOSE_CODES, ERROR_CODES, isErrorCode } from '@svc/protocol';
import { errorOfClose } from '../src/channel.ts';
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
