import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadSettings, type Settings } from '../../config/settings.js';
import { createLogger } from '../../src/adapters/log.js';
import { startPlatform, type Platform, type Role } from '../../src/main.js';
import type { LifecycleHook } from '../../src/actors/content/lifecycle-hooks.js';
import { startRedisServer } from '../../src/dev/redis-server.js';
import { PlatformClient } from '../../src/client/index.js';
import { checkAnswersOf, stopCheckingAnswersOf } from './openapi-check.js';

/**
 * Starts the platform in this process on a free port against the private test Redis
 * (REDIS_URL, set by test/support/global-setup.ts), with files in a temporary directory.
 * Logs are silent unless TEST_LOG is set. Its answers are checked against its OpenAPI document
 * (test/support/openapi-check.ts).
 */
export async function startTestPlatform(
  overrides: Partial<Record<keyof Settings, string>> = {},
  roles?: Role[],
  clock?: () => number,
  hooks?: LifecycleHook[],
): Promise<Platform & { url: string; base: string }> {
  // Files go to a fresh directory of the run (unless a test names S3 or a directory).
  const filesDir = mkdtempSync(join(tmpdir(), 'test-files-'));
  // The archiver's passes run only where a test asks (test/archive): a pass of a long-lived platform
  // would move history under another test's feet.
  const settings = loadSettings({
    ...process.env,
    PORT: '0',
    PARTITIONS: '8',
    LEASE_MS: '2000',
    FILES_DIR: filesDir,
    ARCHIVE_INTERVAL_SECONDS: '604800',
    ...overrides,
  });
  const log = createLogger(process.env.TEST_LOG ?? 'silent');
  const p = await startPlatform({ settings, roles, log, clock, hooks });
  const stop = p.stop;
  // Every answer of this platform is checked against its OpenAPI document (CONTRACT §18).
  if (p.url) checkAnswersOf(p.url);
  p.stop = async () => {
    if (p.url) stopCheckingAnswersOf(p.url);
    await stop();
    rmSync(filesDir, { recursive: true, force: true });
  };
  return Object.assign(p, { url: p.url ?? '', base: `${p.url}/content-service` });
}

/**
 * A platform on a Redis of its own, stopped with it: for tests that read every partition (an
 * export) or write to the event streams directly, which the shared Redis of the run must not see.
 */
export async function startIsolatedPlatform(overrides: Partial<Record<keyof Settings, string>> = {}): Promise<Awaited<ReturnType<typeof startTestPlatform>>> {
  const redis = await startRedisServer({ appendonly: false });
  const p = await startTestPlatform({ ...overrides, REDIS_URL: redis.url });
  const stop = p.stop;
  p.stop = async () => {
    await stop();
    await redis.stop();
  };
  return p;
}

/** The tests' HTTP client is the platform's typed client (src/client), so the two stay in step. */
export { PlatformClient as Client } from '../../src/client/index.js';

export const article = (title: string, extra: Record<string, unknown> = {}) => ({
  system: { contentType: 'article' },
  aspects: { body: { _type: 'body', title, ...extra } },
});

/**
 * `n` signed-in clients with the reader role in `__global__`: accounts made for the test (a bound
 * per caller, such as COMPARES_ON_THREAD_PER_CALLER, is met by one account's requests alone).
 */
export async function readerAccounts(
  p: { base: string; tokens?: { createAccount(name: string, password: string, contexts: Record<string, string[]>): Promise<unknown> } },
  n: number,
): Promise<PlatformClient[]> {
  const out: PlatformClient[] = [];
  for (let i = 0; i < n; i++) {
    const name = `r${Date.now().toString(36)}${Math.random().toString(36).slice(2, 6)}${i}`;
    await p.tokens!.createAccount(name, 'pw', { __global__: ['reader'] });
    out.push(await new PlatformClient(p.base).login(name, 'pw'));
  }
  return out;
}
