/**
 * V8 settings for the server process, applied by its entry points (main.ts, and the benchmarks'
 * servers, which must run as the server does) before anything else is loaded. Imported for its
 * effect.
 *
 * `--no-allocation-site-pretenuring`: V8 watches where objects are allocated, and when most of
 * a site's objects survive a young-generation collection it starts allocating that site's
 * objects straight in the old generation. A request's objects die within microseconds, but if a
 * collection happens to run while many requests are in flight (during a start-up stall, say),
 * their sites can be judged long-lived, and from then on every request's objects are garbage in
 * the old generation. Measured here: a server process so afflicted spent ten times as long in
 * young-generation collections, ran full collections under steady load, and cost 1.5–2× the CPU
 * per request of its twin, for its whole life. It happened to 4 of 32 fresh server processes
 * (in 4 of 8 runs of four), and to none of 32 without pretenuring. A server's long-lived state
 * here is few objects (the click candidates are typed arrays), so there is little for
 * pretenuring to save.
 */
import v8 from 'node:v8';

v8.setFlagsFromString('--no-allocation-site-pretenuring');
