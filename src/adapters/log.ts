import { pino, type Logger } from 'pino';

export type { Logger };

/** Structured JSON logs (pino) on stdout; one logger per process, children per role. */
export function createLogger(level: string = process.env.LOG_LEVEL ?? 'info'): Logger {
  return pino({
    level,
    base: { pid: process.pid },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: { paths: ['password', '*.password', 'token', '*.token', 'headers["x-auth-token"]'], censor: '***' },
  });
}
