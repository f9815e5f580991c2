import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startS3Server } from '../../src/dev/s3-server.js';

export interface TestS3 {
  endPoint: string;
  port?: number;
  useSSL: boolean;
  accessKey: string;
  secretKey: string;
  /** True when this test process started the server (S3Proxy), false for S3_ENDPOINT. */
  own: boolean;
  /** The same as S3_* settings, to hand to a platform under test (pick your own S3_BUCKET). */
  env: Record<string, string>;
}

let s3: Promise<TestS3> | undefined;

/**
 * One S3 server for the whole test process: the one the S3_* variables name when S3_ENDPOINT
 * is set (tests then write into buckets of their own there), else S3Proxy started once on a
 * free port with its data in a temporary directory; both end with the test process.
 */
export function ensureTestS3(): Promise<TestS3> {
  s3 ??= (async (): Promise<TestS3> => {
    const e = process.env;
    if (e.S3_ENDPOINT) {
      console.warn(`[test setup] WARNING: using the S3 server at S3_ENDPOINT=${e.S3_ENDPOINT}; the tests create buckets and objects in it`);
      const useSSL = ['true', '1', 'yes'].includes(e.S3_USE_SSL ?? '');
      const port = e.S3_PORT ? Number(e.S3_PORT) : undefined;
      return {
        endPoint: e.S3_ENDPOINT,
        port,
        useSSL,
        accessKey: e.S3_ACCESS_KEY ?? '',
        secretKey: e.S3_SECRET_KEY ?? '',
        own: false,
        env: Object.fromEntries(
          Object.entries({
            S3_ENDPOINT: e.S3_ENDPOINT,
            S3_PORT: e.S3_PORT,
            S3_USE_SSL: String(useSSL),
            S3_ACCESS_KEY: e.S3_ACCESS_KEY,
            S3_SECRET_KEY: e.S3_SECRET_KEY,
          }).filter((kv): kv is [string, string] => kv[1] !== undefined),
        ),
      };
    }
    const dataDir = mkdtempSync(join(tmpdir(), 'test-s3-'));
    const server = await startS3Server({ dataDir, log: (m) => console.log(`[test setup] ${m}`) });
    // Registered after the server's own exit hook, so the server is killed before its data goes.
    process.on('exit', () => rmSync(dataDir, { recursive: true, force: true }));
    return {
      endPoint: server.endPoint,
      port: server.port,
      useSSL: false,
      accessKey: server.accessKey,
      secretKey: server.secretKey,
      own: true,
      env: {
        S3_ENDPOINT: server.endPoint,
        S3_PORT: String(server.port),
        S3_USE_SSL: 'false',
        S3_ACCESS_KEY: server.accessKey,
        S3_SECRET_KEY: server.secretKey,
      },
    };
  })();
  return s3;
}
