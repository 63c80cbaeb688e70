import assert from 'node:assert/strict';
import { test } from 'node:test';
import { ConfigError, loadConfig } from '../src/areas.ts';

test('the deferred-link candidate bound has a default, is read from the environment and checked', () => {
  assert.equal(loadConfig({}).links.maxCandidates, 1_000_000);
  assert.equal(loadConfig({ SVC_LINKS_MAX_CANDIDATES: '20000' }).links.maxCandidates, 20_000);
  for (const bad of ['10', '1e99', '2.5', 'many', '-1']) {
    assert.throws(
      () => loadConfig({ SVC_LINKS_MAX_CANDIDATES: bad }),
      (err: Error) => err instanceof ConfigError && /SVC_LINKS_MAX_CANDIDATES/.test(err.message),
      bad,
    );
  }
});

test('recordings go to an S3-compatible store only with SVC_RECORDINGS_S3_BUCKET; its settings are checked', () => {
  assert.equal(loadConfig({}).media.recordingsS3, null);
  assert.deepEqual(
    loadConfig({
      SVC_RECORDINGS_S3_BUCKET: 'rec',
      SVC_RECORDINGS_S3_ENDPOINT: 'http://127.0.0.1:9000',
      SVC_RECORDINGS_S3_ACCESS_KEY_ID: 'k',
      SVC_RECORDINGS_S3_SECRET_ACCESS_KEY: 's',
      SVC_RECORDINGS_S3_PREFIX: 'svc/',
    }).media.recordingsS3,
    {
      bucket: 'rec',
      endpoint: 'http://127.0.0.1:9000',
      region: 'us-east-1',
      accessKeyId: 'k',
      secretAccessKey: 's',
      prefix: 'svc/',
      forcePathStyle: true,
    },
  );
  // AWS itself: virtual-hosted style, the SDK's credential chain.
  const aws = loadConfig({ SVC_RECORDINGS_S3_BUCKET: 'rec', SVC_RECORDINGS_S3_REGION: 'eu-west-1' })
    .media.recordingsS3!;
  assert.equal(aws.forcePathStyle, false);
  assert.equal(aws.accessKeyId, null);
  assert.equal(aws.region, 'eu-west-1');
  for (const [bad, name] of [
    [{ SVC_RECORDINGS_S3_ENDPOINT: 'ftp://x' }, 'SVC_RECORDINGS_S3_ENDPOINT'],
    [{ SVC_RECORDINGS_S3_ACCESS_KEY_ID: 'k' }, 'SVC_RECORDINGS_S3_SECRET_ACCESS_KEY'],
    [{ SVC_RECORDINGS_S3_FORCE_PATH_STYLE: 'yes' }, 'SVC_RECORDINGS_S3_FORCE_PATH_STYLE'],
  ] as const) {
    assert.throws(
      () => loadConfig({ SVC_RECORDINGS_S3_BUCKET: 'rec', ...bad }),
      (err: Error) => err instanceof ConfigError && err.message.includes(name),
      name,
    );
  }
});

test('SVC_TRUST_PROXY is checked at start: an entry that is no address, range or name is named', () => {
  assert.deepEqual(loadConfig({}).trustProxy, []);
  assert.deepEqual(
    loadConfig({ SVC_TRUST_PROXY: '10.0.0.1, 192.168.0.0/16,loopback,::1' }).trustProxy,
    ['10.0.0.1', '192.168.0.0/16', 'loopback', '::1'],
  );
  for (const bad of ['proxy.example.com', '10.0.0.1/33', '10.0.0.1,300.1.1.1', 'loopback,lan']) {
    assert.throws(
      () => loadConfig({ SVC_TRUST_PROXY: bad }),
      (err: Error) =>
        err instanceof ConfigError &&
        err.message.startsWith('SVC_TRUST_PROXY') &&
        err.message.includes(`"${bad.split(',').at(-1)}"`),
      bad,
    );
  }
});

test('SVC_ADMIN_TOKEN and SVC_SECRET must be 32 characters or more; the refusal never shows the value', () => {
  const long = 'k'.repeat(32);
  const config = loadConfig({ SVC_ADMIN_TOKEN: long, SVC_SECRET: `${long}s` });
  assert.equal(config.adminToken, long);
  assert.equal(config.secret, `${long}s`);
  assert.equal(loadConfig({}).adminToken, undefined);
  assert.equal(loadConfig({}).secret, undefined);
  for (const name of ['SVC_ADMIN_TOKEN', 'SVC_SECRET']) {
    for (const short of ['changeme', 'hunter2-but-longer-31-characters'.slice(0, 31)]) {
      assert.throws(
        () => loadConfig({ [name]: short }),
        (err: Error) =>
          err instanceof ConfigError &&
          err.message.startsWith(`${name} must be at least 32 characters`) &&
          err.message.endsWith(`it has ${short.length}`) &&
          !err.message.includes(short),
        `${name}=${short}`,
      );
    }
  }
});

test('SVC_PUBLIC_URL must be an http(s) URL with nothing after its path; credentials are not repeated', () => {
  assert.equal(loadConfig({ PORT: '9000' }).publicUrl, 'http://localhost:9000');
  assert.equal(
    loadConfig({ SVC_PUBLIC_URL: 'https://svc.example.com/api/' }).publicUrl,
    'https://svc.example.com/api',
  );
  for (const bad of [
    'svc.example.com',
    'ftp://svc.example.com',
    'https://x.example/?a=1',
    'https://x.example/#top',
  ]) {
    assert.throws(
      () => loadConfig({ SVC_PUBLIC_URL: bad }),
      (err: Error) => err instanceof ConfigError && err.message.includes(`"${bad}"`),
      bad,
    );
  }
  assert.throws(
    () => loadConfig({ SVC_PUBLIC_URL: 'https://admin:pa55word@svc.example.com' }),
    (err: Error) => err instanceof ConfigError && !err.message.includes('pa55word'),
  );
});
