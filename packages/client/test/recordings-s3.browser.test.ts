import assert from 'node:assert/strict';
import { type ChildProcess, execFile, execFileSync, spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { BACKENDS, uniqueName } from '../../server/test/helpers.ts';
import {
  type MediaNetwork,
  mediaEnv,
  mediaNetwork,
} from '../../server/test/media/media-harness.ts';
import { type ListeningServer, startListeningServer } from './helpers.ts';
import { bundlePage, openBrowser, type TestBrowser } from './media-browser.ts';
import { recordingTestsSkip } from './recordings-harness.ts';

// Recordings uploaded to an S3-compatible store: S3Proxy (org.gaul:s3proxy from Maven Central,
// filesystem backend) runs on 127.0.0.1; a real Chromium publishes into the embedded Janus
// (network namespace `svcrs3`, 10.78.3.0/24); the finished file goes to the bucket and the
// download URL is the store's presigned GET.
const S3PROXY_VERSION = '2.6.0';
const skip = recordingTestsSkip([
  '/usr/bin/janus-pp-rec',
  '/usr/bin/ffmpeg',
  '/usr/bin/java',
  '/usr/bin/mvn',
]);

const freePort = () =>
  new Promise<number>((resolve) => {
    const srv = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });

/**
 * S3Proxy's class path, resolved by Maven from a one-dependency pom (the jars are cached in
 * ~/.m2, the class path in the temporary folder while its jars are there).
 */
async function s3proxyClasspath(dir: string) {
  const cached = path.join(os.tmpdir(), `svc-s3proxy-${S3PROXY_VERSION}.classpath`);
  if (fs.existsSync(cached)) {
    const cp = fs.readFileSync(cached, 'utf8').trim();
    if (cp.length > 0 && cp.split(path.delimiter).every((j) => fs.existsSync(j))) return cp;
  }
  fs.writeFileSync(
    path.join(dir, 'pom.xml'),
    `<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>svc.test</groupId><artifactId>s3proxy-runner</artifactId><version>1</version><packaging>pom</packaging>
<dependencies><dependency><groupId>org.gaul</groupId><artifactId>s3proxy</artifactId><version>${S3PROXY_VERSION}</version></dependency></dependencies>
</project>`,
  );
  await new Promise<void>((resolve, reject) =>
    execFile(
      'mvn',
      ['-q', '-B', 'dependency:build-classpath', '-Dmdep.outputFile=cp.txt'].concat(
        '-Dmdep.includeScope=runtime',
      ),
      { cwd: dir, timeout: 300_000 },
      (err, stdout) => (err ? reject(new Error(`mvn: ${err.message} ${stdout}`)) : resolve()),
    ),
  );
  const cp = fs.readFileSync(path.join(dir, 'cp.txt'), 'utf8').trim();
  fs.writeFileSync(cached, cp);
  return cp;
}

describe('recordings in an S3-compatible store (S3Proxy)', {
  skip: skip ?? false,
  timeout: 180_000,
}, () => {
  let netns: MediaNetwork;
  let s: ListeningServer;
  let browser: TestBrowser;
  let proxy: ChildProcess;
  const room = uniqueName('recs3');
  const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'svcr-s3-'));
  const basedir = path.join(tmp, 'store');
  const bucket = 'svc-recordings';
  let endpoint = '';

  async function api(method: string, url: string, body?: unknown) {
    const res = await fetch(`${s.baseUrl}/v1/realtime${url}`, {
      method,
      headers: {
        authorization: `Bearer ${s.project.serverKey}`,
        'x-project-id': s.project.id,
        'content-type': 'application/json',
      },
      ...(body === undefined && method === 'GET' ? {} : { body: JSON.stringify(body ?? {}) }),
    });
    const text = await res.text();
    return { status: res.status, body: text ? JSON.parse(text) : null };
  }

  before(async () => {
    // S3Proxy: a bucket is a folder of the filesystem backend.
    const port = await freePort();
    endpoint = `http://127.0.0.1:${port}`;
    fs.mkdirSync(path.join(basedir, bucket), { recursive: true });
    const conf = path.join(tmp, 's3proxy.conf');
    fs.writeFileSync(
      conf,
      [
        `s3proxy.endpoint=${endpoint}`,
        's3proxy.authorization=aws-v2-or-v4',
        's3proxy.identity=svc-test-key',
        's3proxy.credential=svc-test-secret',
        'jclouds.provider=filesystem',
        `jclouds.filesystem.basedir=${basedir}`,
      ].join('\n'),
    );
    // Started alongside Janus and the browser (Maven and the JVM take seconds).
    const proxyStarted = s3proxyClasspath(tmp).then((classpath) => {
      const log = fs.openSync(path.join(tmp, 's3proxy.log'), 'w');
      proxy = spawn('java', ['-cp', classpath, 'org.gaul.s3proxy.Main', '--properties', conf], {
        stdio: ['ignore', log, log],
        env: { ...process.env, LOG_LEVEL: 'warn' },
      });
    });
    netns = mediaNetwork('s3', 3, { prefix: 'svcr', octet: 78 });
    const bundle = await bundlePage();
    s = await startListeningServer(BACKENDS[0]!, {
      ...mediaEnv(netns),
      SVC_RECORDING_STOP_WAIT_MS: '60000',
      SVC_RECORDINGS_S3_BUCKET: bucket,
      SVC_RECORDINGS_S3_ENDPOINT: endpoint,
      SVC_RECORDINGS_S3_ACCESS_KEY_ID: 'svc-test-key',
      SVC_RECORDINGS_S3_SECRET_ACCESS_KEY: 'svc-test-secret',
      SVC_RECORDINGS_S3_PREFIX: 'rec/',
    });
    await s.app.svc.media!.ready(10_000);
    browser = await openBrowser(s.baseUrl, bundle);
    const connected = await browser.page.evaluate(([c, o]) => (window as any).svcm.connect(c, o), [
      { projectId: s.project.id, apiKey: s.project.clientKey, baseUrl: s.baseUrl },
      {
        roomName: room,
        liveType: 'VIDEO_CONFERENCE',
        participant: { userId: 'alice', name: 'Alice', isHost: true },
      },
    ] as const);
    assert.equal(connected.ok, true, JSON.stringify(connected));
    for (const src of ['camera', 'microphone']) {
      const r = await browser.page.evaluate((x) => (window as any).svcm.enable(x), src);
      assert.equal(r.ok, true, JSON.stringify(r));
    }
    await proxyStarted;
    // S3Proxy answers (any status) once it listens.
    const deadline = Date.now() + 60_000;
    for (;;) {
      const up = await fetch(endpoint).then(
        () => true,
        () => false,
      );
      if (up) break;
      assert.ok(Date.now() < deadline && proxy.exitCode === null, 'S3Proxy did not start');
      await new Promise((r) => setTimeout(r, 200));
    }
  });

  after(async () => {
    await browser?.close();
    await s?.close();
    netns?.down();
    proxy?.kill('SIGTERM');
    fs.rmSync(tmp, { recursive: true, force: true });
  });

  test('the file is uploaded to the bucket and downloads by a presigned URL of the store', async () => {
    const started = await api('POST', '/recordings', { roomName: room, fileType: 'WEBM' });
    assert.equal(started.status, 201, JSON.stringify(started.body));
    const id = started.body.egressId as string;
    const mjrDir = path.join(s.config.media.recordingsDir, 'mjr', id);
    const deadline = Date.now() + 10_000;
    while (
      !(
        fs.existsSync(mjrDir) &&
        fs.readdirSync(mjrDir).filter((f) => f.endsWith('.mjr')).length >= 2
      )
    ) {
      assert.ok(Date.now() < deadline, 'no .mjr files');
      await new Promise((r) => setTimeout(r, 50));
    }
    await new Promise((r) => setTimeout(r, 2000));
    const info = (await api('POST', `/recordings/${id}/stop`)).body;
    assert.equal(info.status, 'COMPLETED', JSON.stringify(info));
    // Not in DATA_DIR any more; in the bucket under the prefix, byte for byte the reported size.
    const local = path.join(s.config.media.recordingsDir, 'files', s.project.id, info.filepath);
    assert.equal(fs.existsSync(local), false);
    const stored = path.join(basedir, bucket, 'rec', s.project.id, info.filepath);
    assert.equal(fs.statSync(stored).size, info.size);
    const url = await api('GET', `/recordings/${id}/download-url?expiresIn=600`);
    assert.equal(url.status, 200, JSON.stringify(url.body));
    const u = new URL(url.body.downloadUrl);
    assert.equal(u.origin, endpoint);
    assert.equal(u.pathname, `/${bucket}/rec/${s.project.id}/${info.filepath}`);
    assert.equal(u.searchParams.get('X-Amz-Expires'), '600');
    assert.equal(url.body.files[0].downloadUrl, url.body.downloadUrl);
    const res = await fetch(u);
    assert.equal(res.status, 200);
    const bytes = Buffer.from(await res.arrayBuffer());
    assert.deepEqual(bytes, fs.readFileSync(stored));
    const file = path.join(tmp, 'dl.webm');
    fs.writeFileSync(file, bytes);
    const probe = JSON.parse(
      execFileSync('ffprobe', ['-v', 'error', '-print_format', 'json', '-show_streams', file], {
        encoding: 'utf8',
      }),
    ) as { streams: { codec_name: string }[] };
    assert.deepEqual(probe.streams.map((x) => x.codec_name).sort(), ['opus', 'vp8']);
    // The store checks its signature: an altered one is refused.
    const altered = new URL(u);
    const sig = altered.searchParams.get('X-Amz-Signature')!;
    altered.searchParams.set('X-Amz-Signature', `${sig[0] === 'a' ? 'b' : 'a'}${sig.slice(1)}`);
    assert.equal((await fetch(altered)).status, 403);
  });
});
