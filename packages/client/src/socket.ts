/**
 * The few members of a WebSocket the library uses: the browser's global WebSocket and the `ws`
 * package's WebSocket both have them.
 */
export interface SvcWebSocket {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: { code: number; reason: string }) => void) | null;
  onerror: ((event: unknown) => void) | null;
}

/** Opens a WebSocket to `url` (already carrying `access_token`). */
export type SvcWebSocketFactory = (url: string) => SvcWebSocket;

/**
 * The runtime's WebSocket: the global one (browsers, Deno, Node ≥ 22) when present, else the `ws`
 * package (Node 20), loaded on first use so that browser bundles never include it.
 */
export async function defaultWebSocketFactory(): Promise<SvcWebSocketFactory> {
  const Global = (globalThis as { WebSocket?: new (url: string) => SvcWebSocket }).WebSocket;
  if (Global) return (url) => new Global(url);
  const { default: WebSocket } = await import('ws');
  return (url) => new WebSocket(url) as unknown as SvcWebSocket;
}
