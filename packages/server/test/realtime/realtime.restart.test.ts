import assert from 'node:assert/strict';
import { test } from 'node:test';
import { buildApp } from '../../src/app.ts';
import { loadConfig } from '../../src/areas.ts';
import { MemoryState } from '../../src/state/index.ts';
import { freshStore } from '../helpers.ts';

test('after a restart of the embedded default, rooms left open end after the empty timeout', async () => {
  const fresh = await freshStore('sqlite');
  const config = loadConfig({
    LOG_LEVEL: 'silent',
    SVC_BOOTSTRAP: 'false',
    SVC_REALTIME_EMPTY_TIMEOUT_MS: '200',
    SVC_REALTIME_SWEEP_INTERVAL_MS: '20',
  });
  const start = () =>
    buildApp({
      config,
      adminToken: 'admin',
      secret: 'secret',
      store: fresh.store,
      state: new MemoryState(),
    });
  const first = await start();
  const project = await first.svc.projects.create({ name: 'p' });
  const key = await first.svc.keys.create(project.id, { type: 'server' });
  const headers = { authorization: `Bearer ${key.key}`, 'x-project-id': project.id };
  const created = await first.inject({
    method: 'POST',
    url: '/v1/realtime/rooms',
    headers,
    payload: { roomName: 'left-open', liveType: 'VIDEO_CALL' },
  });
  assert.equal(created.statusCode, 201);
  // Simulate a crash: the record says the room is open, but nothing in memory will end it.
  await fresh.store.db
    .updateTable('realtime_rooms')
    .set({ status: 'ACTIVE', num_participants: 3 })
    .execute();
  await first.close();

  const second = await start();
  try {
    await second.ready();
    let ended = false;
    // Polls the public API: the only observable sign of the end (a room never started emits no event).
    for (let i = 0; i < 200 && !ended; i++) {
      const res = await second.inject({
        method: 'GET',
        url: '/v1/realtime/rooms/left-open',
        headers,
      });
      ended = res.json().status === 'ENDED';
      if (!ended) await new Promise((r) => setTimeout(r, 20));
    }
    assert.ok(ended, 'the room ended after the empty timeout');
  } finally {
    await second.close();
    await fresh.drop();
  }
});
