import assert from 'node:assert/strict';
import { test } from 'node:test';
import { CLOSE_CODES } from '@svc/protocol';
import { Channel } from '../src/channel.ts';
import { SvcError } from '../src/errors.ts';
import type { SvcWebSocket } from '../src/socket.ts';

/** A socket the test drives by hand: the race below depends on event order, not on timing. */
function fakeSocket() {
  const sent: string[] = [];
  const socket: SvcWebSocket & { readyState: number } = {
    readyState: 0,
    send: (data) => sent.push(data),
    close: () => {},
    onopen: null,
    onmessage: null,
    onclose: null,
    onerror: null,
  };
  return { socket, sent };
}

test('a request made while the server is closing the socket fails with the close reason', async () => {
  const { socket, sent } = fakeSocket();
  const channel = new Channel(5_000);
  const opened = channel.open(() => socket, 'ws://test');
  socket.readyState = 1;
  socket.onopen!({});
  await opened;
  // The server refuses the token right after the upgrade: an error frame, then its close frame.
  socket.onmessage!({
    data: JSON.stringify({
      type: 'error',
      code: 'token_expired',
      message: 'The token has expired.',
    }),
  });
  socket.readyState = 2;
  const join = channel.request('session.join', {});
  assert.equal(sent.length, 0, 'nothing is sent on a closing socket');
  socket.readyState = 3;
  socket.onclose!({ code: CLOSE_CODES.TOKEN_EXPIRED, reason: '' });
  const err = await join.then(
    () => assert.fail('the request must fail'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof SvcError);
  assert.equal(err.code, 'token_expired');
  assert.equal(err.closeCode, CLOSE_CODES.TOKEN_EXPIRED);
  // After the close, requests fail at once with the same explanation.
  const late = await channel.request('ping').catch((e: unknown) => e);
  assert.equal((late as SvcError).code, 'token_expired');
});
