import { envInt as int } from '../env.ts';

/** Links settings (`SVC_LINKS_*`; names are part of the public contract). */
export interface LinksConfig {
  /**
   * `SVC_LINKS_MAX_CANDIDATES` (1000000): deferred-link match candidates the in-process store
   * keeps at most (least recently written dropped first; not used with Redis).
   */
  maxCandidates: number;
}

export function loadLinksConfig(env: NodeJS.ProcessEnv): LinksConfig {
  return { maxCandidates: int(env, 'SVC_LINKS_MAX_CANDIDATES', 1_000_000, 1000, 50_000_000) };
}
