/**
 * Network quality from the signaling round trip (WebSocket ping → pong), on the 0–5 scale of the
 * anchors: 5 excellent (< 100 ms), 4 good (< 200 ms), 3 fair (< 400 ms), 2 poor (< 700 ms),
 * 1 bad (≥ 700 ms), 0 lost (no pong for two measurement periods). Media statistics from the SFU
 * will refine it once the media plane reports them.
 */
export function qualityFromRtt(rttMs: number | null): number {
  if (rttMs === null) return 0;
  if (rttMs < 100) return 5;
  if (rttMs < 200) return 4;
  if (rttMs < 400) return 3;
  if (rttMs < 700) return 2;
  return 1;
}
