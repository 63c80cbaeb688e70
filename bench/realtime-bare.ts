/**
 * The baseline for the realtime bench: a bare `ws` server that broadcasts each message to every
 * socket in the same envelope Svc uses (`{type, seq, ts, data}`), with no auth, rooms or state.
 * Prints `{"port"}`; answers IPC `{cmd: "memory"}` like realtime-server.ts.
 */
import { WebSocketServer } from 'ws';

const wss = new WebSocketServer({ port: 0, host: '127.0.0.1', maxPayload: 65_536 });
let seq = 0;
wss.on('connection', (ws) => {
  ws.on('message', (raw) => {
    let req: { data?: { message?: string } };
    try {
      req = JSON.parse(raw.toString());
    } catch {
      return;
    }
    seq += 1;
    const frame = JSON.stringify({
      type: 'message.received',
      seq,
      ts: Date.now(),
      data: { message: req.data?.message ?? '', sender: { userId: 'u', name: 'U' }, viaApi: false },
    });
    // Encoded once, as Svc does: the baseline gets the same optimisation.
    const bytes = Buffer.from(frame);
    for (const client of wss.clients) client.send(bytes, { binary: false });
  });
});
process.on('message', (msg: { id: number; cmd: string }) => {
  if (msg.cmd === 'memory') {
    global.gc?.();
    global.gc?.();
    process.send!({ id: msg.id, memory: process.memoryUsage() });
  }
});
wss.on('listening', () => {
  process.stdout.write(`${JSON.stringify({ port: (wss.address() as { port: number }).port })}\n`);
});
process.on('SIGTERM', () => {
  for (const c of wss.clients) c.terminate();
  wss.close(() => process.exit(0));
});
