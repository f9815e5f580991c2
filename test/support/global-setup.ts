/**
 * Mocha root setup (loaded through `require` in .mocharc.json, before any spec file).
 *
 * Starts ONE private redis-server per test run on a free port and points REDIS_URL at it,
 * so tests may flush it freely; they never touch a server they did not start. With
 * TEST_REDIS_URL set, that server is used instead (tests write keys into it).
 *
 * The server is started at module load (top-level await), not in mochaGlobalSetup, because
 * mocha imports the spec files before it runs mochaGlobalSetup, and modules such as
 * config/settings.ts may read the environment when imported.
 */
import { pingRedis, startRedisServer, type RedisServerHandle } from '../../src/dev/redis-server.js';
import { installFetchCheck, takeMismatches } from './openapi-check.js';

process.env.NODE_ENV = 'test';
// The suites log in from 127.0.0.1 all along, with deliberate wrong passwords among them: with
// the default limit (10 failures in 15 minutes per client address) a later suite's logins would
// answer 429. Tests of the limit set LOGIN_MAX_FAILURES themselves.
process.env.LOGIN_MAX_FAILURES ??= '1000000';

let server: RedisServerHandle | undefined;

if (process.env.TEST_REDIS_URL) {
  process.env.REDIS_URL = process.env.TEST_REDIS_URL;
  console.warn(`[test setup] WARNING: using TEST_REDIS_URL=${process.env.TEST_REDIS_URL}; the tests will write (and may delete) keys in it`);
} else {
  server = await startRedisServer({ appendonly: false });
  process.env.REDIS_URL = server.url;
  console.log(`[test setup] private redis-server pid ${server.pid} on port ${server.port}`);
  // Node's default SIGTERM exit skips 'exit' handlers; exit normally so the server stops too.
  process.once('SIGTERM', () => process.exit(143));
}

// Every answer of a test platform is checked against its OpenAPI document (CONTRACT §18).
installFetchCheck();

/**
 * Answers that did not fit the document inside tests that passed anyway (the test caught the
 * error, e.g. while polling with `eventually`). A failing root hook would make mocha skip every
 * later test of the run, so these are listed as they happen and fail the run at its end
 * (mochaGlobalTeardown: exit code 1).
 */
const swallowed: string[] = [];

export const mochaHooks = {
  /** What a hook outside a test saw (it failed there already) is not this test's. */
  beforeEach(): void {
    takeMismatches();
  },
  afterEach(this: Mocha.Context): void {
    const mismatches = [...new Set(takeMismatches())];
    // A test that failed has reported its own mismatch (or fails for another reason already).
    if (!mismatches.length || this.currentTest?.state !== 'passed') return;
    const report = `"${this.currentTest.fullTitle()}" passed, but ${mismatches.length} answer(s) did not fit the OpenAPI document:\n${mismatches.join('\n')}`;
    swallowed.push(report);
    console.error(`[openapi check] ${report}`);
  },
};

export async function mochaGlobalSetup(): Promise<void> {
  // The server was started at load time; fail fast here if Redis is not usable.
  if (!(await pingRedis(process.env.REDIS_URL!, 3000))) {
    throw new Error(`[test setup] Redis at ${process.env.REDIS_URL} does not answer PING`);
  }
}

export async function mochaGlobalTeardown(): Promise<void> {
  if (server) {
    await server.stop();
    server = undefined;
  }
  if (swallowed.length)
    throw new Error(`[openapi check] the run fails: answers that did not fit the OpenAPI document (CONTRACT §18):\n${swallowed.join('\n')}`);
}
