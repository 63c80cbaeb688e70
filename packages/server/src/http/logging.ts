import type { FastifyBaseLogger, FastifyRequest } from 'fastify';
import type { Bindings, ChildLoggerOptions, Logger, LoggerOptions } from 'pino';

/**
 * Query parameters whose values are replaced in logged URLs: secrets, and phone numbers (personal
 * data). Names are compared after percent-decoding, so `access%5Ftoken` is `access_token`.
 */
const REDACTED_PARAMS = new Set([
  'access_token',
  'token',
  'key',
  'api_key',
  'apikey',
  'phonenumber',
  'phone',
]);
const QUERY_PARAM = /([?&])([^=&#]*)=([^&#]*)/g;
/** Anything shaped like a Svc key, wherever it appears in a logged string. */
const KEY_SHAPE = /svc_[A-Za-z0-9_-]{8,}/g;

function decodedName(name: string): string {
  try {
    return decodeURIComponent(name.replaceAll('+', ' ')).toLowerCase();
  } catch {
    return name.toLowerCase();
  }
}

export function scrub(text: string): string {
  return text
    .replace(QUERY_PARAM, (whole, sep: string, name: string) =>
      REDACTED_PARAMS.has(decodedName(name)) ? `${sep}${name}=[REDACTED]` : whole,
    )
    .replace(KEY_SHAPE, 'svc_[REDACTED]');
}

/**
 * pino options: key material is redacted wherever it could appear (headers, bodies that
 * carry keys or tokens, URLs). Request logs carry only method, URL (scrubbed), and peer.
 */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers["x-api-key"]',
        'headers.authorization',
        'headers["x-api-key"]',
        '*.key',
        '*.token',
        '*.secret',
        '*.adminToken',
        'key',
        'token',
        'secret',
      ],
      censor: '[REDACTED]',
    },
    serializers: {
      req(request: FastifyRequest) {
        return { method: request.method, url: scrub(request.url), remoteAddress: request.ip };
      },
    },
  };
}

type Level = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace';
type LogFn = (...args: unknown[]) => void;

/**
 * A request's logger, made only when something is logged. Fastify gives every request a pino
 * child bound to its request id; with redaction configured, making one costs more than a whole
 * redirect's own work, and almost every request logs nothing at the default level. Calls below
 * the parent's level return at once and never make the child.
 */
export class LazyChildLogger {
  private made: Logger | undefined;

  constructor(
    private parent: Logger,
    private childBindings: Bindings,
    private options: ChildLoggerOptions,
  ) {}

  /** The real child logger, made on first use. */
  private real(): Logger {
    this.made ??= this.parent.child(this.childBindings, this.options);
    return this.made;
  }

  private write(level: Level, args: unknown[]) {
    if (this.made === undefined && this.options.level === undefined) {
      if (!this.parent.isLevelEnabled(level)) return;
    }
    (this.real()[level] as LogFn)(...args);
  }

  fatal(...args: unknown[]) {
    this.write('fatal', args);
  }
  error(...args: unknown[]) {
    this.write('error', args);
  }
  warn(...args: unknown[]) {
    this.write('warn', args);
  }
  info(...args: unknown[]) {
    this.write('info', args);
  }
  debug(...args: unknown[]) {
    this.write('debug', args);
  }
  trace(...args: unknown[]) {
    this.write('trace', args);
  }
  silent() {}

  get level(): string {
    return this.made?.level ?? this.options.level ?? this.parent.level;
  }
  set level(level: string) {
    this.real().level = level;
  }
  get msgPrefix(): string {
    return this.real().msgPrefix ?? '';
  }
  isLevelEnabled(level: string): boolean {
    return this.made || this.options.level
      ? this.real().isLevelEnabled(level)
      : this.parent.isLevelEnabled(level);
  }
  child(bindings: Bindings, options?: ChildLoggerOptions): Logger {
    return this.real().child(bindings, options);
  }
  bindings(): Bindings {
    return this.made ? this.made.bindings() : { ...this.parent.bindings(), ...this.childBindings };
  }
}

/** Fastify's `childLoggerFactory`: request loggers that cost nothing until used. */
export function lazyChildLoggerFactory(
  this: unknown,
  logger: FastifyBaseLogger,
  bindings: Bindings,
  options: ChildLoggerOptions,
): FastifyBaseLogger {
  // The app's logger is pino (see loggerOptions).
  return new LazyChildLogger(logger as Logger, bindings, options) as unknown as FastifyBaseLogger;
}
