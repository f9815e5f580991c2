import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs (pino) on stdout; one logger per process, children per role.
 * `destination` replaces stdout (tests read the lines).
 */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info', destination?: DestinationStream): Logger {
  const options = {
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['password', '*.password', 'token', '*.token', 'headers["x-auth-token"]'], censor: '***' },
  };
  return destination ? pino(options, destination) : pino(options);
}
