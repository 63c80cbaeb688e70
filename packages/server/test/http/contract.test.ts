// Replays a representative request of every operation in the OpenAPI document and checks the
// answer against the document: its status, its body (against the documented schema) and the
// headers the API sends (each one it sends must be documented for that answer).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { after, before, describe, test } from 'node:test';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import {
  fillPath,
  operations,
  type ResourceIds,
  sample,
  validBodies,
  validQueries,
} from '../fixtures/operations.ts';
import { BACKENDS, startTestServer, type TestServer } from '../helpers.ts';

/** Headers whose presence the document must declare. */
const CONTRACT_HEADERS = ['request-id', 'ratelimit', 'ratelimit-policy', 'retry-after', 'location'];

/**
 * Operations whose representative request is refused on purpose (its refusal is what a caller
 * meets first without more set-up); every other operation must succeed.
 */
const REFUSED = new Map([
  ['POST /v1/verify', 'invalid_code'],
  // The contract server runs without a media engine (the recordings browser test starts one).
  ['POST /v1/realtime/recordings', 'media_unavailable'],
  // The fixture recording is COMPLETED (pause and resume are covered by the browser test).
  ['POST /v1/realtime/recordings/{egressId}/pause', 'recording_not_active'],
  ['POST /v1/realtime/recordings/{egressId}/resume', 'recording_not_active'],
]);

const pointer = (...parts: string[]) =>
  parts.map((p) => p.replaceAll('~', '~0').replaceAll('/', '~1')).join('/');

for (const backend of BACKENDS) {
  describe(`contract: every operation as documented (${backend.name})`, () => {
    let s: TestServer;
    let ids: ResourceIds;

    before(async () => {
      s = await startTestServer(backend, { env: { SVC_WEBHOOK_ALLOW_PRIVATE: 'true' } });
      const spare = await s.admin('POST', '/projects', { name: 'spare' });
      const key = await s.admin('POST', `/projects/${spare.id}/keys`, { type: 'client' });
      const hook = await s.admin('POST', `/projects/${spare.id}/webhooks`, {
        url: 'http://127.0.0.1:9/hook',
      });
      await s.admin('PATCH', `/projects/${spare.id}`, { webhooksEnabled: true });
      const sent = await s.admin('POST', `/projects/${spare.id}/webhooks/${hook.id}/test`);
      const headers = {
        authorization: `Bearer ${s.project.serverKey}`,
        'x-project-id': s.project.id,
      };
      const link = await s.app.inject({
        method: 'POST',
        url: '/v1/sdk/links',
        headers,
        payload: { url: 'https://example.com/c' },
      });
      await s.app.inject({
        method: 'POST',
        url: '/v1/realtime/rooms',
        headers,
        payload: { roomName: 'contract-room', liveType: 'VIDEO_CONFERENCE' },
      });
      // A finished recording (its row and file, as the conversion job leaves them) and its signed URL.
      const egressId = 'eg_contract';
      await s.app.svc.store.db
        .insertInto('realtime_recordings')
        .values({
          egress_id: egressId,
          project_id: s.project.id,
          room_name: 'contract-room',
          room_id: 'rm_contract',
          status: 'COMPLETED',
          file_type: 'WEBM',
          filepath: 'contract-room/eg_contract.webm',
          mjr_dir: path.join(s.config.media.recordingsDir, 'mjr', egressId),
          engine: 'embedded',
          started_at: new Date().toISOString(),
          ended_at: new Date().toISOString(),
          completed_at: new Date().toISOString(),
          duration: 1,
          size: 4,
          error: null,
          error_detail: null,
          attempts: 1,
        })
        .execute();
      const file = path.join(
        s.config.media.recordingsDir,
        'files',
        s.project.id,
        'contract-room/eg_contract.webm',
      );
      fs.mkdirSync(path.dirname(file), { recursive: true });
      fs.writeFileSync(file, 'webm');
      const signed = await s.app.inject({
        url: `/v1/realtime/recordings/${egressId}/download-url`,
        headers,
      });
      ids = {
        egressId,
        recordingFileQuery: new URL(signed.json().downloadUrl).search.slice(1),
        projectId: spare.id,
        keyId: key.id,
        webhookId: hook.id,
        deliveryId: sent.deliveryId,
        linkId: link.json().id,
        slug: link.json().slug,
        roomName: 'contract-room',
      };
    });
    after(() => s.close());

    test('status, body and headers of every answer are in the document', async () => {
      const doc = (await s.app.inject({ url: '/openapi.json' })).json();
      const ajv = new Ajv2020({ strict: false, allErrors: true, validateSchema: false });
      addFormats.default(ajv);
      ajv.addSchema(doc, 'openapi');
      const bodies = validBodies(ids);
      // Deletions last, the spare project's own deletion at the very end.
      const ops = operations(doc).sort(
        (a, b) =>
          Number(a.method === 'DELETE') - Number(b.method === 'DELETE') ||
          Number(a.route === '/v1/admin/projects/{projectId}' && a.method === 'DELETE') -
            Number(b.route === '/v1/admin/projects/{projectId}' && b.method === 'DELETE'),
      );
      const failures: string[] = [];
      const refused: string[] = [];
      for (const op of ops) {
        const key = `${op.method} ${op.route}`;
        const admin = op.route.startsWith('/v1/admin');
        const headers: Record<string, string> = admin
          ? { authorization: `Bearer ${s.adminToken}` }
          : op.route.startsWith('/v1/')
            ? { authorization: `Bearer ${s.project.serverKey}`, 'x-project-id': s.project.id }
            : {};
        const body = op.body ? (bodies[key] ?? sample(op.body)) : undefined;
        const query = validQueries(ids)[key];
        const res = await s.app.inject({
          method: op.method as 'GET',
          url: `${fillPath(ids, op.route)}${query ? `?${query}` : ''}`,
          headers,
          ...(body === undefined ? {} : { payload: body as object }),
        });
        const code = String(res.statusCode);
        const documented = doc.paths[op.route][op.method.toLowerCase()].responses;
        const answerKey = code in documented ? code : `${code[0]}XX`;
        const answer = documented[answerKey];
        if (!answer) {
          failures.push(`${key}: ${code} is not documented (${Object.keys(documented)})`);
          continue;
        }
        if (res.statusCode >= 400) {
          const problem = res.json();
          if (REFUSED.get(key) !== problem.code)
            refused.push(`${key}: ${code} ${problem.code} ${problem.detail ?? ''}`);
        }
        const type = String(res.headers['content-type'] ?? '').split(';')[0]!;
        if (!answer.content) {
          if (res.body.length > 0)
            failures.push(`${key}: ${code} has a body the document does not describe`);
        } else if (!(type in answer.content)) {
          failures.push(`${key}: ${code} is ${type}, documented ${Object.keys(answer.content)}`);
        } else if (type.endsWith('json')) {
          const path = pointer(
            'paths',
            op.route,
            op.method.toLowerCase(),
            'responses',
            answerKey,
            'content',
            type,
            'schema',
          );
          const validate = ajv.getSchema(`openapi#/${path}`)!;
          if (!validate(res.json())) {
            failures.push(`${key}: ${code} body: ${ajv.errorsText(validate.errors).slice(0, 300)}`);
          }
        }
        const declared = new Set(Object.keys(answer.headers ?? {}).map((h) => h.toLowerCase()));
        for (const h of CONTRACT_HEADERS) {
          if (h in res.headers && !declared.has(h))
            failures.push(`${key}: ${code} sends ${h}, undocumented`);
        }
      }
      assert.deepEqual({ failures, refused }, { failures: [], refused: [] });
    });
  });
}
