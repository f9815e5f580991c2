import { expect } from 'chai';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { pingRedis, startRedisServer } from '../../src/dev/redis-server.js';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('startRedisServer (real redis-server processes)', function () {
  this.timeout(10000);
  let tmp: string;

  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'redis-test-'));
  });
  afterEach(() => {
    rmSync(tmp, { recursive: true, force: true });
  });

  it('global setup points REDIS_URL at a private server that answers PING', async () => {
    expect(process.env.NODE_ENV).to.equal('test');
    expect(process.env.REDIS_URL).to.match(/^redis:\/\//);
    expect(await pingRedis(process.env.REDIS_URL!)).to.equal(true);
  });

  it('starts on a free port, answers PING and commands, and stop() ends the process', async () => {
    const server = await startRedisServer();
    expect(server.url).to.equal(`redis://127.0.0.1:${server.port}`);
    expect(server.port).to.be.greaterThan(0);
    expect(alive(server.pid)).to.equal(true);
    const client = new Redis(server.url);
    try {
      expect(await client.ping()).to.equal('PONG');
      await client.set('k', 'v');
      expect(await client.get('k')).to.equal('v');
      expect(await client.config('GET', 'save')).to.deep.equal(['save', '']);
      expect(await client.config('GET', 'appendonly')).to.deep.equal(['appendonly', 'no']);
    } finally {
      client.disconnect();
    }
    await server.stop();
    expect(alive(server.pid)).to.equal(false);
    expect(await pingRedis(server.url, 300)).to.equal(false);
    await server.stop(); // a second stop is harmless
  });

  it('with appendonly writes AOF files under dir, and they survive a restart', async () => {
    const dir = path.join(tmp, 'data');
    const first = await startRedisServer({ dir, appendonly: true, appendfsync: 'always' });
    const c1 = new Redis(first.url);
    await c1.set('durable', 'yes');
    c1.disconnect();
    await first.stop();
    const aofDir = path.join(dir, 'appendonlydir');
    const files = readdirSync(aofDir);
    expect(files.some((f) => f.endsWith('.manifest'))).to.equal(true);
    expect(files.some((f) => f.endsWith('.incr.aof'))).to.equal(true);

    const second = await startRedisServer({ dir, appendonly: true });
    const c2 = new Redis(second.url);
    try {
      expect(await c2.get('durable')).to.equal('yes');
    } finally {
      c2.disconnect();
      await second.stop();
    }
  });

  it('kill9() kills the process at once', async () => {
    const server = await startRedisServer({ port: undefined });
    server.kill9();
    await server.exited;
    expect(alive(server.pid)).to.equal(false);
    expect(await pingRedis(server.url, 300)).to.equal(false);
    await server.stop(); // stop after a crash resolves
  });

  it('fails with a clear error, including the server output, when it cannot start', async () => {
    const blocker = await startRedisServer();
    try {
      await startRedisServer({ port: blocker.port, startTimeoutMs: 3000 }).then(
        () => expect.fail('second server on the same port started'),
        (e: Error) => {
          expect(e.message).to.match(/exited with code 1 before answering PING/);
          expect(e.message).to.match(/Address already in use/i);
        },
      );
    } finally {
      await blocker.stop();
    }
  });
});
