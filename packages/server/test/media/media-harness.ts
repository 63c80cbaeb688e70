import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { JanusSocket } from '../../src/media/janus-client.ts';

/** True when this machine can run the media end-to-end tests (root, ip netns, Janus). */
export function mediaTestsPossible(): string | null {
  if (process.getuid?.() !== 0) return 'needs root (ip netns)';
  if (!fs.existsSync('/usr/bin/janus')) return 'needs Janus (apt-get install janus)';
  try {
    execFileSync('ip', ['netns', 'list'], { stdio: 'ignore' });
  } catch {
    return 'needs ip netns';
  }
  return null;
}

const ip = (...args: string[]) => execFileSync('ip', args, { stdio: ['ignore', 'pipe', 'pipe'] });

/**
 * A network namespace for Janus, joined to the root namespace by a veth pair on 10.77.<subnet>.0/24:
 * the root side (server, browsers) is .1, Janus's side is .2. Janus can reach nothing else, so
 * all media crosses the veth. Names start with `svcm` and are unique per test file (`tag`).
 */
export interface MediaNetwork {
  ns: string;
  hostIp: string;
  janusIp: string;
  /** A program that runs Janus inside the namespace (SVC_JANUS_BINARY). */
  janusWrapper: string;
  dir: string;
  down(): void;
}

export function mediaNetwork(
  tag: string,
  subnet: number,
  /** Other areas' tests use their own prefix and `10.<octet>.x.0/24` (recordings: `svcr`, 78). */
  area: { prefix: string; octet: number } = { prefix: 'svcm', octet: 77 },
): MediaNetwork {
  if (!/^[a-z0-9]{1,6}$/.test(tag)) throw new Error('tag: 1–6 of [a-z0-9]');
  const ns = `${area.prefix}${tag}`;
  const hostIf = `${ns}a`;
  const nsIf = `${ns}b`;
  const hostIp = `10.${area.octet}.${subnet}.1`;
  const janusIp = `10.${area.octet}.${subnet}.2`;
  const teardown = () => {
    try {
      ip('netns', 'del', ns);
    } catch {}
    try {
      ip('link', 'del', hostIf);
    } catch {}
  };
  teardown(); // a previous run that crashed
  ip('netns', 'add', ns);
  ip('link', 'add', hostIf, 'type', 'veth', 'peer', 'name', nsIf);
  ip('link', 'set', nsIf, 'netns', ns);
  ip('addr', 'add', `${hostIp}/24`, 'dev', hostIf);
  ip('link', 'set', hostIf, 'up');
  ip('-n', ns, 'addr', 'add', `${janusIp}/24`, 'dev', nsIf);
  ip('-n', ns, 'link', 'set', 'lo', 'up');
  ip('-n', ns, 'link', 'set', nsIf, 'up');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), `${ns}-`));
  const janusWrapper = path.join(dir, 'janus-in-ns.sh');
  // `ip netns exec` execs in place: the child's pid is Janus's own.
  fs.writeFileSync(janusWrapper, `#!/bin/sh\nexec ip netns exec ${ns} /usr/bin/janus "$@"\n`, {
    mode: 0o755,
  });
  return {
    ns,
    hostIp,
    janusIp,
    janusWrapper,
    dir,
    down() {
      teardown();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

export const ADMIN_SECRET = 'svcm-admin-secret';

/** Server environment for media in `net` (embedded Janus in the namespace). */
export function mediaEnv(net: MediaNetwork, extra: Record<string, string> = {}) {
  return {
    SVC_MEDIA: 'auto',
    SVC_JANUS_BINARY: net.janusWrapper,
    SVC_MEDIA_INTERFACE: net.janusIp,
    SVC_JANUS_ADMIN_SECRET: ADMIN_SECRET,
    SVC_MEDIA_RTP_PORTS: '20000-20400',
    SVC_JANUS_RESTART_MAX_DELAY_MS: '500',
    DATA_DIR: path.join(net.dir, 'data'),
    ...extra,
  };
}

/**
 * The last lines of the Janus log of a server started with {@link mediaEnv} (and of `others`,
 * files in the network's directory), for a failure's message: a CI log then says which side
 * dropped the media.
 */
export function logTails(net: MediaNetwork, others: string[] = [], lines = 40): string {
  const files = [
    path.join(net.dir, 'data', 'janus', 'janus.log'),
    ...others.map((f) => path.join(net.dir, f)),
  ];
  return files
    .map((file) => {
      let text: string;
      try {
        text = fs.readFileSync(file, 'utf8');
      } catch {
        return `--- ${path.basename(file)}: none`;
      }
      return `--- ${path.basename(file)}, last ${lines} lines:\n${text.trimEnd().split('\n').slice(-lines).join('\n')}`;
    })
    .join('\n');
}

/** Runs `fn` with a connection to Janus's admin API, which takes the admin secret on each call. */
async function withJanusAdmin<T>(
  net: MediaNetwork,
  adminPort: number,
  fn: (call: (body: Record<string, unknown>) => Promise<Record<string, unknown>>) => Promise<T>,
): Promise<T> {
  const admin = new JanusSocket(`ws://${net.janusIp}:${adminPort}`, 'janus-admin-protocol');
  await admin.open();
  try {
    return await fn((body) => admin.request({ ...body, admin_secret: ADMIN_SECRET }));
  } finally {
    admin.close();
  }
}

type AdminCall = Parameters<Parameters<typeof withJanusAdmin>[2]>[0];

/** Every (session, handle) Janus holds. */
async function listHandles(call: AdminCall) {
  const out: { sessionId: number; handleId: number }[] = [];
  const res = await call({ janus: 'list_sessions' });
  for (const sessionId of res.sessions as number[]) {
    const h = await call({ janus: 'list_handles', session_id: sessionId });
    for (const handleId of h.handles as number[]) out.push({ sessionId, handleId });
  }
  return out;
}

/** Every handle Janus holds, over its admin API (what tests count back to zero). */
export async function janusHandles(net: MediaNetwork, adminPort = 7188): Promise<number> {
  return withJanusAdmin(net, adminPort, async (call) => (await listHandles(call)).length);
}

/** The videoroom handles Janus holds (publishers and subscribers), over its admin API. */
export async function janusPeerHandles(
  net: MediaNetwork,
  adminPort = 7188,
): Promise<{ sessionId: number; handleId: number; type: 'publisher' | 'subscriber' }[]> {
  return withJanusAdmin(net, adminPort, async (call) => {
    const out: { sessionId: number; handleId: number; type: 'publisher' | 'subscriber' }[] = [];
    for (const { sessionId, handleId } of await listHandles(call)) {
      const info = await call({ janus: 'handle_info', session_id: sessionId, handle_id: handleId });
      const type = (info.info as { plugin_specific?: { type?: string } } | undefined)
        ?.plugin_specific?.type;
      if (type === 'publisher' || type === 'subscriber') out.push({ sessionId, handleId, type });
    }
    return out;
  });
}

/**
 * Makes Janus hang up a handle's PeerConnection (admin `hangup_webrtc`), as it does when ICE or
 * DTLS fails on its side: it sends a DTLS close alert and reports the hang-up to the server.
 */
export async function janusHangup(
  net: MediaNetwork,
  handle: { sessionId: number; handleId: number },
  adminPort = 7188,
) {
  await withJanusAdmin(net, adminPort, (call) =>
    call({ janus: 'hangup_webrtc', session_id: handle.sessionId, handle_id: handle.handleId }),
  );
}

/**
 * A syntactically complete single-track offer, as a WebRTC stack would send it. Janus answers
 * it (it checks ICE and DTLS only when media flows), which is all signaling tests need.
 */
export function fakeOffer(kind: 'audio' | 'video', extraMLines = 0) {
  const m = (k: string, mid: number) =>
    k === 'audio'
      ? [
          `m=audio 9 UDP/TLS/RTP/SAVPF 111`,
          'c=IN IP4 0.0.0.0',
          'a=rtcp:9 IN IP4 0.0.0.0',
          'a=ice-ufrag:abcd',
          'a=ice-pwd:abcdefghijklmnopqrstuvwx',
          'a=ice-options:trickle',
          'a=fingerprint:sha-256 11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00',
          'a=setup:actpass',
          `a=mid:${mid}`,
          'a=sendonly',
          'a=msid:s1 a1',
          'a=rtcp-mux',
          'a=rtpmap:111 opus/48000/2',
          'a=fmtp:111 minptime=10;useinbandfec=1',
          'a=ssrc:1111 cname:svcm',
        ]
      : [
          `m=video 9 UDP/TLS/RTP/SAVPF 96`,
          'c=IN IP4 0.0.0.0',
          'a=rtcp:9 IN IP4 0.0.0.0',
          'a=ice-ufrag:abcd',
          'a=ice-pwd:abcdefghijklmnopqrstuvwx',
          'a=ice-options:trickle',
          'a=fingerprint:sha-256 11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00',
          'a=setup:actpass',
          `a=mid:${mid}`,
          'a=sendonly',
          'a=msid:s1 v1',
          'a=rtcp-mux',
          'a=rtcp-rsize',
          'a=rtpmap:96 VP8/90000',
          'a=rtcp-fb:96 nack',
          'a=rtcp-fb:96 nack pli',
          'a=ssrc:2222 cname:svcm',
        ];
  const lines = [
    'v=0',
    'o=- 4611731400430051336 2 IN IP4 127.0.0.1',
    's=-',
    't=0 0',
    `a=group:BUNDLE ${Array.from({ length: 1 + extraMLines }, (_, i) => i).join(' ')}`,
    'a=msid-semantic: WMS s1',
    ...m(kind, 0),
  ];
  for (let i = 1; i <= extraMLines; i++) lines.push(...m(kind === 'audio' ? 'video' : 'audio', i));
  return `${lines.join('\r\n')}\r\n`;
}
