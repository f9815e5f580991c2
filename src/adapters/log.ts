import { pino, type DestinationStream, type Logger } from 'pino';
import { build as prettyStream } from 'pino-pretty';

export type { Logger };

/** The log formats (LOG_FORMAT): JSON lines for machines (the default), or lines for people. */
export const LOG_FORMATS = ['json', 'pretty'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

/**
 * Structured logs (pino) on stdout; one logger per process, children per role. `json` (the
 * default, for production and log collectors) writes one JSON object a line; `pretty` writes
 * `[12:00:01.234] INFO: [web] message` lines (pino-pretty, in this thread, so nothing is lost on
 * exit) with the other fields below the line, the start's `settings` as one aligned
 * `NAME  value` line each. Secrets are redacted before either format sees them.
 * `destination` replaces stdout (tests read the lines).
 */
export function createLogger(
  level: string = process.env.LOG_LEVEL ?? 'info',
  destination?: DestinationStream,
  format: string = process.env.LOG_FORMAT ?? 'json',
): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['password', '*.password', 'token', '*.token', 'headers["x-auth-token"]'], censor: '***' },
  };
  if (format === 'pretty') {
    const pretty = prettyStream({
      destination: (destination as NodeJS.WritableStream | undefined) ?? 1,
      sync: true,
      colorize: destination ? false : Boolean(process.stdout.isTTY),
      translateTime: 'SYS:HH:MM:ss.l',
      ignore: 'pid,hostname,role',
      messageFormat: '{if role}[{role}] {end}{msg}',
      customPrettifiers: { settings: (value) => settingsBlock(value) },
    });
    return pino(options, pretty);
  }
  return destination ? pino(options, destination) : pino(options);
}

/** The start's settings (already masked by describeSettings) as aligned `NAME  value` lines; unset ones left out. */
function settingsBlock(value: unknown): string {
  if (!value || typeof value !== 'object') return String(value);
  const set = Object.entries(value as Record<string, unknown>).filter(([, v]) => v !== undefined && v !== null && v !== '');
  const width = Math.max(0, ...set.map(([k]) => k.length));
  return `\n${set.map(([k, v]) => `  ${k.padEnd(width)}  ${typeof v === 'string' ? v : JSON.stringify(v)}`).join('\n')}`;
}
