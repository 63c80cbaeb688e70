import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createLocalJWKSet, jwtVerify } from 'jose';
import { ManualClock } from '../src/clock.ts';
import { Sealer } from '../src/sealing.ts';
import { SigningKeys } from '../src/tokens/signing-keys.ts';
import { DIALECTS, freshStore } from './helpers.ts';

for (const dialect of DIALECTS) {
  describe(`signing keys (${dialect})`, () => {
    let fresh: Awaited<ReturnType<typeof freshStore>>;
    const clock = new ManualClock(Date.parse('2026-06-01T00:00:00Z'));
    before(async () => {
      fresh = await freshStore(dialect);
    });
    after(() => fresh.drop());

    test('tokens verify against the published JWKS, with kid, jti, aud and expiry', async () => {
      const keys = new SigningKeys(
        fresh.store,
        clock,
        'http://svc.test',
        new Sealer('test-secret'),
      );
      await keys.init();
      const { token, jti } = await keys.sign(
        { room: 'r1' },
        { audience: 'svc:test', subject: 'u1', expiresInSeconds: 60 },
      );
      const jwks = createLocalJWKSet(keys.jwks());
      const { payload, protectedHeader } = await jwtVerify(token, jwks, {
        issuer: 'http://svc.test',
        audience: 'svc:test',
        currentDate: new Date(clock.now()),
      });
      assert.equal(payload.room, 'r1');
      assert.equal(payload.jti, jti);
      assert.equal(protectedHeader.kid, keys.jwks().keys[0].kid);
      assert.equal((await keys.verify(token, 'svc:test')).ok, true);
      assert.deepEqual(await keys.verify(token, 'svc:other'), { ok: false, reason: 'invalid' });
      assert.deepEqual(await keys.verify(`${token.slice(0, -3)}abc`, 'svc:test'), {
        ok: false,
        reason: 'invalid',
      });
      clock.advance(61_000);
      assert.deepEqual(await keys.verify(token, 'svc:test'), { ok: false, reason: 'expired' });
    });

    test('rotation keeps old tokens valid until the old key is retired; a second node sees the set', async () => {
      const a = new SigningKeys(fresh.store, clock, 'http://svc.test', new Sealer('test-secret'));
      await a.init();
      const old = await a.sign({}, { audience: 'svc:test', subject: 'u', expiresInSeconds: 600 });
      const oldKid = a.jwks().keys[0].kid!;
      await a.rotate();
      const b = new SigningKeys(fresh.store, clock, 'http://svc.test', new Sealer('test-secret'));
      await b.init();
      assert.equal(b.jwks().keys.length, a.jwks().keys.length);
      assert.equal((await b.verify(old.token, 'svc:test')).ok, true);
      const fresh2 = await a.sign(
        {},
        { audience: 'svc:test', subject: 'u', expiresInSeconds: 600 },
      );
      assert.notEqual(
        JSON.parse(Buffer.from(fresh2.token.split('.')[0], 'base64url').toString()).kid,
        oldKid,
      );
      await a.retire(oldKid);
      assert.equal((await a.verify(old.token, 'svc:test')).ok, false);
      assert.equal((await a.verify(fresh2.token, 'svc:test')).ok, true);
    });

    test("a burst of tokens signed with another node's new key all verify", async () => {
      const a = new SigningKeys(fresh.store, clock, 'http://svc.test', new Sealer('test-secret'));
      const b = new SigningKeys(fresh.store, clock, 'http://svc.test', new Sealer('test-secret'));
      await a.init();
      await b.init();
      // A rotates after B loaded the set: B meets the new kid with requests in flight together
      // (each may look the set up again; none may be refused while one does).
      clock.advance(1000);
      const kid = await a.rotate();
      assert.equal(a.jwks().keys[0].kid, kid, 'A signs with its new key');
      const tokens = await Promise.all(
        Array.from({ length: 10 }, () =>
          a.sign({}, { audience: 'svc:test', subject: 'u', expiresInSeconds: 600 }),
        ),
      );
      const results = await Promise.all(tokens.map((t) => b.verify(t.token, 'svc:test')));
      assert.deepEqual(
        results.map((r) => r.ok),
        tokens.map(() => true),
      );
      // Unknown kids still cost at most one look a second: a second miss right after is refused.
      const forged = `${Buffer.from(JSON.stringify({ alg: 'ES256', kid: 'sig_unknown', typ: 'JWT' })).toString('base64url')}.${tokens[0].token.split('.').slice(1).join('.')}`;
      assert.deepEqual(await b.verify(forged, 'svc:test'), { ok: false, reason: 'invalid' });
    });
  });
}
